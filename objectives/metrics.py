"""The metric names a trial of each workload can report, declared before it runs.

The sweep optimises and constrains metrics by name; a name no trial will
ever report (`val_acuracy`, or `val_accuracy` on resnet, which measures no
accuracy) would make every trial infeasible and burn the whole sweep. With
the names declared here per configuration, the sweep refuses such a name
before the first trial. The contract test (tests/search/sweep/test_metric_names.py) runs
each workload and checks that what it reports is declared.

The user's ``objective.callable`` returns whatever it likes: None here, and
the sweep checks the names against its first trial instead.
"""

from __future__ import annotations

from objectives.config import CustomConfig, GptConfig, TrialConfig

# Every trial that trains through run.py (model and timing figures).
TRAINING_METRICS = frozenset({
    "params_count_before_model_pruning", "flops_per_sample_before_model_pruning", "params_count",
    "flops_per_sample", "params_nonzero", "throughput_samples_per_s", "throughput_cv", "throughput_windows",
    "throughput_window_steps", "throughput_warmup_steps", "step_time_p50_ms", "step_time_p95_ms",
    "data_wait_fraction", "input_bound", "timed_start_unix_s", "timed_end_unix_s", "timed_samples",
    "samples_trained", "train_wall_s", "train_loss_final", "lr_effective", "loader_worker_processes", "steps",
    "peak_rss_bytes", "throughput_between_epoch_ends_samples_per_s", "loader_epoch_restart_s",
})
CUDA_METRICS = frozenset({"cuda_peak_allocated_bytes", "cuda_peak_reserved_bytes"})  # on a GPU
ACCURACY_METRICS = frozenset({"val_loss", "val_accuracy", "eval_wall_s"})  # objective.measures_accuracy
TARGET_METRICS = frozenset({"reached_target", "target_evals", "target_eval_wall_s", "time_to_accuracy_s"})
# Set per trial by the sweep's early stopping (train.stop_below_samples_per_s, the pruner's report).
EARLY_STOP_METRICS = frozenset({"probe_throughput_samples_per_s", "early_stop_evals", "early_stop_eval_wall_s"})
LANGUAGE_MODEL_METRICS = frozenset({"throughput_tokens_per_s", "model_flops_per_token"})


def reported_metrics(cfg: TrialConfig) -> frozenset[str] | None:
    """Every metric a trial at this configuration can report (on any device), or None
    for the user's callable, which alone knows what it returns."""
    objective = cfg.objective
    if isinstance(objective, CustomConfig) and objective.callable is not None:
        return None
    names = set(TRAINING_METRICS | CUDA_METRICS | EARLY_STOP_METRICS)
    if objective.measures_accuracy:
        names |= ACCURACY_METRICS
        if cfg.train.target_val_accuracy is not None:
            names |= TARGET_METRICS
    if isinstance(objective, GptConfig):
        names |= LANGUAGE_MODEL_METRICS
    if cfg.parallel.compile != "none":
        names.add("compile_wall_s")
    return frozenset(names)
