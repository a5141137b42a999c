"""What a sweep trial trains: ``run_trial(cfg) -> TrialResult``.

The sweep forks a fresh child per trial and calls ``run_trial`` with the
resolved config dict; this package trains the workload ``objective.name``
names for a fixed sample budget and reports speed, accuracy and size:

- ``digits``: sklearn's bundled digits and a small CNN (objectives/digits.py)
- ``gpt``: a byte-level decoder-only transformer on the stdlib's own source
  (objectives/gpt.py, objectives/corpus.py); also tokens/s and model FLOPs/token
- ``resnet``: a small ResNet on synthetic images, throughput only
  (objectives/resnet.py; ``objective.measures_accuracy: false``)
- ``custom``: the user's ``objective.callable`` (wrapped, knobs not applied),
  or their ``_target_`` model and datasets trained like the others
  (objectives/custom.py, objectives/instantiate.py)

Every knob and the flag that controls it (one module each in objectives/knobs/,
listed in ``objectives.knobs.KNOBS``; the README's table is checked against it):

- batch size (``batch_size``, per rank) and its LR rule
  (``optim.lr_scaling``: sqrt | linear | none, from ``optim.base_batch_size``)
- DataLoader workers (``loader.num_workers``, ``pin_memory``,
  ``persistent_workers``, ``prefetch_factor``, ``augment_on_device``)
- precision (``precision``: fp32 | tf32 | bf16 | fp16 | fp8; CPU runs fp32, bf16;
  fp8 needs ``parallel.compile`` other than none)
- model pruning (``model_pruning.ratio`` in [0, 0.9], ``model_pruning.method``:
  structured | unstructured | '2:4'; '2:4' takes ratio 0.5 and precision bf16 or fp16)
- parallelism (``parallel.devices`` DDP ranks, ``parallel.threads`` per rank,
  ``parallel.grad_accum`` micro-batches per step)
- compile (``parallel.compile``: none | default | reduce-overhead | max-autotune,
  ``parallel.compile_backend``)
- memory (``memory.activation_checkpointing``, ``memory.expandable_segments``)
- framework (``framework.channels_last``, ``framework.cudnn_benchmark``)
- the optimizer (``optim.lr``, ``optim.weight_decay``, ``optim.fused``)
- the budget and timing (``train.budget_samples``, ``warmup_steps``,
  ``window_steps``, ``seed``, ``eval_batch_size``): windows timed between
  clock reads taken just after a device synchronize, with no host read of a
  training tensor inside them (objectives/train.py, objectives/timing.py);
  their wall-clock intervals, evaluation pauses left out, are the result's
  ``timed_windows_unix_s``, over which the sweep integrates GPU energy
- time to accuracy (``train.target_val_accuracy``, ``train.eval_every_samples``)
- early stopping (objectives/in_trial_stopping.py): a throughput probe against
  ``train.stop_below_samples_per_s`` after ``train.probe_steps``, and the
  learning curve handed to ``run_trial(cfg, report)``'s ``report(step,
  value) -> should_stop``; a stopped trial's outcome is ``stopped_early``

A value this machine cannot run is refused before any work by the knob's
hardware check (``HardwareError``, a ConfigError; the trial ends ``infeasible``).
A knob a workload cannot use is listed in info ``knobs_not_applied``.

Imports only torch, numpy, scikit-learn, psutil and torch-pruning; never the
sweeper, Optuna, Hydra or MLflow (the ``report`` callable is the sweep's).
"""

from typing import Any

from objectives.config import CombinationError, ConfigError, HardwareError, TrialConfig, parse_config
from objectives.hardware import Hardware
from objectives.result import TrialResult

__all__ = ["CombinationError", "ConfigError", "Hardware", "HardwareError", "TrialConfig", "TrialResult",
           "parse_config", "run_trial"]


def __getattr__(name: str) -> Any:
    """``run_trial`` is imported on first use: it imports torch, while the config, its rules and the
    knobs' hardware checks above do not, so the sweep reads them without paying for torch (seconds
    per start); the trials' forkserver preloads objectives.run."""
    if name == "run_trial":
        from objectives.run import run_trial

        return run_trial
    raise AttributeError(f"module 'objectives' has no attribute {name!r}")
