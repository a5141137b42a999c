#!/usr/bin/env bash
# The first run on a GPU machine, in one go, with every step capped in time:
#   lane 1: nvidia-smi, `search doctor`, the cuda-marked tests, `search selftest`
#   lane 2: a shortened GPU default sweep (`python -m search multirun`, gpt2-small on
#           conf/search/gpu.yaml with a small budget), side by side with lane 1
# Side by side the lanes share the GPU, so lane 2's speeds are for "does it run";
# ONE_AT_A_TIME=1 runs lane 1 first, then lane 2 alone, for speeds worth reporting.
#
# Usage: bash scripts/bench/gpu_first_run.sh OUTDIR [lane 2's extra overrides ...]
#   env: PYTHON (default python3), CHECKS_CAP_S (default 330), SWEEP_CAP_S (default 330),
#        ONE_AT_A_TIME (default 0), SELFTEST_ARGS (e.g. "--only precision"; default: every value)
# Needs, installed or on PYTHONPATH beside torch: optuna, hydra-core, mlflow-skinny, plotly, matplotlib,
# psutil, torchao and greenlet (without greenlet the GP sampler proposes one L-BFGS-B restart at a time).
# Runs from the repository without installing it (PYTHONPATH), each lane in its own
# temporary directory; OUTDIR gets checks.log, sweep.log and sweep.tar.gz (the sweep's
# directory and MLflow store).
set -u
out=${1:?usage: gpu_first_run.sh OUTDIR [overrides ...]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-python3}
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 COLUMNS=120
checks_cap=${CHECKS_CAP_S:-330}
sweep_cap=${SWEEP_CAP_S:-330}

checks() {
  local dir
  dir=$(mktemp -d)
  cd "$dir" || return 1
  local t0=$SECONDS
  echo "== nvidia-smi"; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv
  "$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0))'
  echo "== doctor"; timeout -k 10 60 "$py" -m search doctor; echo "doctor exit $?"
  echo "== cuda tests"
  (cd "$repo" && timeout -k 10 120 "$py" -m pytest -q -n 0 -p no:cacheprovider -m cuda \
      tests/search/measure/test_nvml_telemetry.py tests/search/commands/test_gpu_default.py \
      tests/objectives/knobs/test_gpu_paths.py); echo "cuda tests exit $?"
  local left=$((checks_cap - (SECONDS - t0)))
  echo "== selftest (cap ${left} s)"
  # shellcheck disable=SC2086
  timeout -k 20 -s INT "$left" "$py" -m search selftest --timeout-s 120 ${SELFTEST_ARGS:-} trial.compile_timeout_s=180
  echo "selftest exit $?"
}

sweep() {
  local dir
  dir=$(mktemp -d)
  cd "$dir" || return 1
  echo "== sweep in $dir (cap ${sweep_cap} s)"
  timeout -k 30 -s INT "$sweep_cap" "$py" -m search multirun \
      train.budget_samples=1024 train.warmup_steps=3 train.window_steps=4 train.eval_batch_size=8 \
      objective.val_batches=4 hydra.sweeper.n_trials=4 'parallel.compile=choice(none,default)' \
      trial.compile_timeout_s=240 "$@"
  echo "sweep exit $?"
  tar czf "$out/sweep.tar.gz" --exclude='*.pt' . 2>/dev/null
}

if [ "${ONE_AT_A_TIME:-0}" = 1 ]; then
  checks >"$out/checks.log" 2>&1
  sweep "$@" >"$out/sweep.log" 2>&1
else
  checks >"$out/checks.log" 2>&1 &
  a=$!
  sweep "$@" >"$out/sweep.log" 2>&1 &
  b=$!
  wait $a $b
fi
echo "---- checks.log (tail)"; tail -n 60 "$out/checks.log"
echo "---- sweep.log (tail)"; tail -n 60 "$out/sweep.log"
