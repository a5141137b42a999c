#!/usr/bin/env bash
# The answer on a GPU with today's code, in one call, each step alone on the GPU under one deadline:
#   1. the GPU default sweep, shortened (`python -m search multirun`, gpt2-small on conf/search/gpu.yaml
#      picked by itself): batch-size probe, your configuration's runs, the start design, the confirmation
#      and the panel; then `search report`, `search export` and what the study and its MLflow parent run
#      hold (scripts/bench/sweep_answer.py)
#   2. the cuda-marked tests: every GPU path, after the code's changes since the last GPU run
#   3. the answer outside the sweep: `search run` of your configuration and of the answer (or, when the
#      answer is your configuration, of its fastest contender), alternated A B A B while time is left,
#      so that the sweep's speedup can be held against runs of its own
#
# Usage: bash scripts/bench/gpu_answer.sh OUTDIR [the sweep's extra overrides ...]
#   env: PYTHON (default python3), DEADLINE_S (default 480), SWEEP_CAP_S (default 300)
# Runs from the repository without installing it (PYTHONPATH); needs optuna, hydra-core, mlflow-skinny,
# plotly, greenlet, torch-pruning and torchao beside torch. OUTDIR gets summary.txt, sweep.log, answer.json,
# checks.log and runs.log.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/bench/gpu_lib.sh
. "$repo/scripts/bench/gpu_lib.sh"
start_in "${1:?usage: gpu_answer.sh OUTDIR [overrides ...]}"
shift
device_facts

# 1. the sweep, in this step's own directory ($work)
c=$(cap "${SWEEP_CAP_S:-300}")
sweep=(train.budget_samples=1024 train.warmup_steps=3 train.window_steps=4 train.eval_batch_size=8
       objective.val_batches=4 hydra.sweeper.n_trials=5 'parallel.compile=choice(none,default)'
       trial.compile_timeout_s=240 "$@")
t0=$SECONDS
echo "python -m search multirun ${sweep[*]}" >"$out/sweep.log"
timeout -k 30 -s INT "$c" "$py" -m search multirun "${sweep[@]}" >>"$out/sweep.log" 2>&1
rc=$?
{
  echo "sweep (exit $rc, $((SECONDS - t0)) s of a $c s cap): ${sweep[*]}"
  grep -E '^(trial |GPU|the GPU|batch-size|baseline|start:|study |removed|confirm)' "$out/sweep.log" | cut -c1-240 |
    sed 's/^/    /'
  sed -n '/─ the answer/,$p' "$out/sweep.log" | head -n 14 | sed 's/^/    /'
} | tee -a "$out/summary.txt"
timeout 60 "$py" -m search report >>"$out/sweep.log" 2>&1
timeout 60 "$py" -m search export >>"$out/sweep.log" 2>&1
echo "export (exit $?): $(ls best-*.yaml 2>/dev/null)" | tee -a "$out/summary.txt"
cp best-*.yaml "$out/" 2>/dev/null
timeout 60 "$py" "$repo/scripts/bench/sweep_answer.py" >"$out/answer.json" 2>>"$out/sweep.log"
"$py" - "$out/answer.json" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
try:
    a = json.load(open(sys.argv[1]))
except Exception as err:
    sys.exit(f"    no answer read: {err}")
ans = a["answer"]
print(f"    study {a['study']}: {a['trials']} trials {a['states']}")
print("    answer:", {k: ans.get(k) for k in ("is_baseline", "speedup", "ci_low", "ci_high", "rounds", "val_accuracy",
                                           "baseline_val_accuracy", "search_wall_s", "confirm_wall_s", "seed_check")})
print("    mlflow:", a["mlflow"].get("metrics"), a["mlflow"].get("status"))
EOF

# 2. the cuda-marked tests
c=$(cap 100)
if [ "$c" = 0 ]; then echo "cuda tests: skipped (deadline)" | tee -a "$out/summary.txt"; else
  t0=$SECONDS
  (cd "$repo" && timeout -k 10 -s INT "$c" "$py" -m pytest -q -n 0 -p no:cacheprovider -m cuda -rs \
    tests/objectives/test_host_sync.py tests/objectives/knobs/test_gpu_paths.py \
    tests/search/measure/test_nvml_telemetry.py tests/search/commands/test_gpu_default.py) >"$out/checks.log" 2>&1
  rc=$?
  { echo "cuda tests (exit $rc, $((SECONDS - t0)) s of a $c s cap):"; tail -n 8 "$out/checks.log" | sed 's/^/    /'; } |
    tee -a "$out/summary.txt"
fi

# 3. your configuration and the answer again, alternated, outside the sweep
mapfile -t base < <("$py" -c 'import json,sys; [print(o) for o in json.load(open(sys.argv[1]))["baseline"] or []]' \
  "$out/answer.json" 2>/dev/null)
mapfile -t cand < <("$py" -c 'import json,sys; [print(o) for o in json.load(open(sys.argv[1]))["contender"] or []]' \
  "$out/answer.json" 2>/dev/null)
if [ "${#base[@]}" = 0 ] || [ "${#cand[@]}" = 0 ]; then
  echo "outside the sweep: nothing to compare (no baseline or contender read)" | tee -a "$out/summary.txt"
else
  echo "outside the sweep: A = ${base[*]}; B = ${cand[*]}" | tee -a "$out/summary.txt"
  for round in 1 2 3; do
    for arm in A B; do
      c=$(cap 90)
      if [ "$c" = 0 ]; then echo "    round $round $arm: skipped (deadline)" | tee -a "$out/summary.txt"; continue; fi
      if [ "$arm" = A ]; then args=("${base[@]}"); else args=("${cand[@]}"); fi
      echo "===== round $round $arm" >>"$out/runs.log"
      timeout -k 10 -s INT "$c" "$py" -m search run "${args[@]}" >"$out/run.log" 2>&1
      rc=$?
      cat "$out/run.log" >>"$out/runs.log"
      echo "    round $round $arm (exit $rc): $(grep -E '│ (throughput_samples_per_s|val_accuracy) ' "$out/run.log" |
        tr -s ' │' ' ' | tr '\n' ' ')" | tee -a "$out/summary.txt"
    done
  done
fi
rm -f "$out/run.log"
echo "---- summary"
cat "$out/summary.txt"
