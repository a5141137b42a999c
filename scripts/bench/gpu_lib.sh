# Shared by the GPU scripts here (source it, with repo set to the repository): their start, a deadline,
# each step's cap under it, and one shortened gpt2-small trial run through `search run` with its metrics
# summarised.

# start_in OUTDIR: out (OUTDIR, made), py ($PYTHON or python3), the repository on PYTHONPATH, the deadline
# ($DEADLINE_S, default 480, from now), and the working directory a fresh temporary one
start_in() {
  out=$1
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  py=${PYTHON:-python3}
  export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=120
  deadline=$((SECONDS + ${DEADLINE_S:-480}))
  work=$(mktemp -d)
  cd "$work" || exit 1
}

# cap S: S seconds, or what is left before the deadline (0: skip the step)
cap() { local left=$((deadline - SECONDS - 5)); if [ "$left" -lt "$1" ]; then echo $((left > 20 ? left : 0)); else echo "$1"; fi; }

shortened=(objective=gpt search=gpu train.budget_samples=4096 train.warmup_steps=5 train.window_steps=10
           train.eval_batch_size=16 objective.val_batches=4 trial.compile_timeout_s=240)

# trial NAME CAP_S overrides...: one trial at the shortened budget; its full table goes to trials.log,
# its key metrics to summary.txt
trial() {
  local name=$1 c
  c=$(cap "$2"); shift 2
  if [ "$c" = 0 ]; then echo "$name: skipped (deadline)" | tee -a "$out/summary.txt"; return; fi
  echo "===== $name: ${shortened[*]} $*" >>"$out/trials.log"
  local t0=$SECONDS
  timeout -k 10 -s INT "$c" "$py" -m search run "${shortened[@]}" "$@" >>"$out/trials.log" 2>&1
  local rc=$?
  {
    echo "$name (exit $rc, $((SECONDS - t0)) s of a ${c} s cap): $*"
    # the metrics table's rows of the last trial in the log
    awk -v n="===== $name:" 'index($0, n) == 1 {on = 1; next} /^===== / {on = 0} on' "$out/trials.log" |
      grep -E 'trial outcome|│ (throughput_samples_per_s|throughput_tokens_per_s|throughput_cv|mfu|cuda_peak_allocated_bytes|compile_wall_s|gpu_power_w_mean|energy_j_per_sample|gpu_sm_clock_mhz_mean|val_loss|precision_used|model_pruning_[a-z_]*|fp8_[a-z_]*|error|status) ' |
      tr -s ' ' | sed 's/^/    /'
  } | tee -a "$out/summary.txt"
}

# device_facts: the GPU and the versions, first lines of summary.txt
device_facts() {
  {
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
    "$py" -c 'import torch, torchao; print("torch", torch.__version__, "cuda", torch.version.cuda, "torchao", torchao.__version__, torch.cuda.get_device_name(0))'
  } 2>&1 | tee "$out/summary.txt"
}
