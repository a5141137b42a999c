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
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/bench/gpu_lib.sh
. "$repo/scripts/bench/gpu_lib.sh"
start_in "${1:?usage: gpu_trials.sh OUTDIR}"
device_facts

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
