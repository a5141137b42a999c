#!/usr/bin/env bash
# What the first GPU runs (gpu_first_run.sh) left unmeasured, one step at a time so that each has
# the GPU to itself, in order of what matters most, under one deadline:
#   1. gpt2-small in bf16, compiled, fused AdamW, batch 64: the MFU row of docs/BENCHMARKS.md
#   2. the cuda-marked tests: the 2:4 kernels against a dense reference, NVML, the GPU default
#   3. gpt2-small in bf16, eager, batch 64: dense, then model_pruning.method='2:4' (its speed)
#   4. gpt2-small in fp8, compiled, batch 64
#   5. `search selftest --only model_pruning.method` (2:4 through an isolated trial)
# The trials run at a shortened budget (4,096 samples; the GPU space's own is 32,768): enough
# timed windows for throughput and MFU, not for val_loss.
#
# Usage: bash scripts/bench/gpu_trials.sh OUTDIR
#   env: PYTHON (default python3), DEADLINE_S (default 480: later steps get what is left, or are skipped)
# Runs from the repository without installing it (PYTHONPATH); needs optuna, hydra-core, mlflow-skinny,
# torch-pruning and torchao beside torch. OUTDIR gets trials.log (every trial's full table),
# checks.log (tests and selftest) and summary.txt (what the end of the output prints).
set -u
out=${1:?usage: gpu_trials.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=120
deadline=$((SECONDS + ${DEADLINE_S:-480}))
work=$(mktemp -d)
cd "$work" || exit 1

# cap S: S seconds, or what is left before the deadline (0: skip the step)
cap() { local left=$((deadline - SECONDS - 5)); if [ "$left" -lt "$1" ]; then echo $((left > 20 ? left : 0)); else echo "$1"; fi; }

shortened=(objective=gpt search=gpu train.budget_samples=4096 train.warmup_steps=5 train.window_steps=10
           train.eval_batch_size=16 objective.val_batches=4 trial.compile_timeout_s=240)
trial() {  # trial NAME CAP_S overrides...
  local name=$1 c
  c=$(cap "$2"); shift 2
  if [ "$c" = 0 ]; then echo "$name: skipped (deadline)" | tee -a "$out/summary.txt"; return; fi
  echo "===== $name: ${shortened[*]} $*" >>"$out/trials.log"
  local t0=$SECONDS
  timeout -k 10 -s INT "$c" "$py" -m search run "${shortened[@]}" "$@" >>"$out/trials.log" 2>&1
  local rc=$?
  {
    echo "$name (exit $rc, $((SECONDS - t0)) s): $*"
    # the metrics table's rows of the last trial in the log
    awk -v n="===== $name:" 'index($0, n) == 1 {on = 1; next} /^===== / {on = 0} on' "$out/trials.log" |
      grep -E 'trial outcome|│ (throughput_samples_per_s|throughput_tokens_per_s|throughput_cv|mfu|cuda_peak_allocated_bytes|compile_wall_s|gpu_power_w_mean|energy_j_per_sample|gpu_sm_clock_mhz_mean|val_loss|precision_used|model_pruning_[a-z_]*|fp8_[a-z_]*|error|status) ' |
      tr -s ' ' | sed 's/^/    /'
  } | tee -a "$out/summary.txt"
}

{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
  "$py" -c 'import torch, torchao; print("torch", torch.__version__, "cuda", torch.version.cuda, "torchao", torchao.__version__, torch.cuda.get_device_name(0))'
} 2>&1 | tee "$out/summary.txt"

trial bf16_compiled_b64 200 precision=bf16 parallel.compile=default batch_size=64 optim.fused=true

c=$(cap 150)
if [ "$c" != 0 ]; then
  (cd "$repo" && timeout -k 10 "$c" "$py" -m pytest -q -n 0 -p no:cacheprovider -m cuda \
      tests/objectives/knobs/test_gpu_paths.py tests/search/measure/test_nvml_telemetry.py \
      tests/search/commands/test_gpu_default.py) >"$out/checks.log" 2>&1
  echo "cuda tests exit $?: $(tail -n 1 "$out/checks.log")" | tee -a "$out/summary.txt"
fi

trial bf16_eager_b64 90 precision=bf16 batch_size=64 optim.fused=true
trial bf16_eager_b64_two_four 90 precision=bf16 batch_size=64 optim.fused=true "model_pruning.method='2:4'" model_pruning.ratio=0.5
trial fp8_compiled_b64 200 precision=fp8 parallel.compile=default batch_size=64 optim.fused=true

c=$(cap 120)
if [ "$c" != 0 ]; then
  echo "===== selftest" >>"$out/checks.log"
  timeout -k 10 -s INT "$c" "$py" -m search selftest --timeout-s 90 --only model_pruning.method >>"$out/checks.log" 2>&1
  echo "selftest --only model_pruning.method exit $?" | tee -a "$out/summary.txt"
  tail -n 15 "$out/checks.log"
fi
echo "---- summary"
cat "$out/summary.txt"
