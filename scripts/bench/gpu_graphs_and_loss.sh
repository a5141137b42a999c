#!/usr/bin/env bash
# What the second GPU runs (gpu_trials.sh, gpu_step_profile.py) left unmeasured, one step at a time so
# that each has the GPU to itself, in order of what matters most, under one deadline:
#   1. the cuda-marked tests: gradient accumulation through CUDA graphs (reduce-overhead, max-autotune)
#      against eager, fp8 at a token count that is not a multiple of 16, 2:4, NVML, the GPU default
#   2. scripts/bench/gpu_fp8_padding.py: which fp8 runs at such token counts, and what padding costs
#   3. what reduce-overhead with 2 micro-batches does WITHOUT the stable .grad buffers (the bug they fix)
#   4. gpt2-small, bf16, compiled (mode default), fused AdamW, batch 64: the loss now compiled apart,
#      inside a trial (the MFU row of docs/BENCHMARKS.md)
#   5. the same in mode reduce-overhead at batch 32 x parallel.grad_accum=2: CUDA graphs with gradient
#      accumulation on gpt2-small, as the GPU space sweeps them
#   6. the same in mode max-autotune at batch 64: how long gpt2-small compiles (whatever time is left)
# Trials run at the shortened budget of gpu_trials.sh (4,096 samples).
#
# Usage: bash scripts/bench/gpu_graphs_and_loss.sh OUTDIR
#   env: PYTHON (default python3), DEADLINE_S (default 480: later steps get what is left, or are skipped)
# Runs from the repository without installing it (PYTHONPATH); needs optuna, hydra-core, mlflow-skinny,
# torch-pruning and torchao beside torch. OUTDIR gets trials.log, checks.log and summary.txt.
set -u
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=scripts/bench/gpu_lib.sh
. "$repo/scripts/bench/gpu_lib.sh"
start_in "${1:?usage: gpu_graphs_and_loss.sh OUTDIR}"
device_facts

step() {  # step NAME CAP_S command...: a non-trial step, its output to checks.log and its tail to summary.txt
  local name=$1 c t0=$SECONDS
  c=$(cap "$2"); shift 2
  if [ "$c" = 0 ]; then echo "$name: skipped (deadline)" | tee -a "$out/summary.txt"; return; fi
  echo "===== $name" >>"$out/checks.log"
  (cd "$repo" && timeout -k 10 -s INT "$c" "$@") >"$out/step.log" 2>&1
  local rc=$?
  cat "$out/step.log" >>"$out/checks.log"
  { echo "$name (exit $rc, $((SECONDS - t0)) s of a ${c} s cap):"; tail -n 12 "$out/step.log" | sed 's/^/    /'; } |
    tee -a "$out/summary.txt"
}

step cuda_tests 200 "$py" -m pytest -q -n 0 -p no:cacheprovider -m cuda -rs \
  tests/objectives/test_host_sync.py tests/objectives/knobs/test_gpu_paths.py \
  tests/search/measure/test_nvml_telemetry.py tests/search/commands/test_gpu_default.py
step fp8_padding 90 "$py" scripts/bench/gpu_fp8_padding.py
step graphs_without_stable_grads 60 "$py" -c '
import sys, torch
sys.path.insert(0, "tests/objectives")
from test_host_sync import trained_with_accumulation as trained
eager = trained("cuda", stable=False)
try:
    graphed = trained("cuda", False, "reduce-overhead")
    print("reduce-overhead, grad_accum 2, no stable buffers: max |w - eager| =",
          max(float((a - b).abs().max()) for a, b in zip(eager, graphed)))
except Exception as err:
    print("reduce-overhead, grad_accum 2, no stable buffers: fails:", type(err).__name__, str(err).splitlines()[0][:200])
'
trial bf16_compiled_b64 150 precision=bf16 parallel.compile=default batch_size=64 optim.fused=true
trial bf16_reduce_overhead_b32_accum2 180 precision=bf16 parallel.compile=reduce-overhead batch_size=32 \
  parallel.grad_accum=2 optim.fused=true
trial bf16_max_autotune_b64 600 precision=bf16 parallel.compile=max-autotune batch_size=64 optim.fused=true
echo "---- summary"
cat "$out/summary.txt"
