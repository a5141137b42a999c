"""Staging: accuracy is trained once per set of maths, throughput is timed for every configuration.

Some knobs change only how fast the same training runs: DataLoader workers
and their settings, CPU threads, `torch.compile`, the fused optimizer,
channels_last, cuDNN's algorithm choice, activation checkpointing (it
recomputes the same values) and the allocator's segments. Two configurations
that differ only in those train the same model, so their validation accuracy
is the same in distribution: another thread count adds floats in another
order, and a dataset whose random draws depend on the process that draws
them (not digits, which seeds each sample's: objectives/sampling.py) draws
anew in each loader worker, so the figures need not be bit-for-bit equal.
The same holds at the confirmation's second seed: an answer with your maths
is checked against your own run there, not trained again
(search/sweep/confirm.py).

So a trial whose maths (every other swept knob) already trained to the end
in this study runs `train.throughput_only=true` (the warm-up and 3+ timed
windows, no evaluation, objectives/timing.py) and is scored with the
accuracy of that earlier trial, named in its `search.accuracy_from`
attribute and MLflow tag. In MLflow that copy is logged as `val_accuracy_of_same_maths`
(`val_loss_of_same_maths`), so that MLflow's `val_accuracy` is only ever measured by
its own run (`logged_metrics`). `hydra.sweeper.staging=false` trains every trial.
"""
from __future__ import annotations

from typing import Any, Mapping

import optuna
from omegaconf import OmegaConf
from optuna.trial import TrialState

from objectives.knobs import SPEED_ONLY  # the keys that leave the trained model's maths unchanged
from search.record import ACCURACY_FROM_ATTR, CONFIRM, OK, SEED_ATTR, metrics, outcome, role
from search.sweep.roles import enqueued_as_asked

INHERITED = ("val_accuracy", "val_loss")
# Metrics of how much a run ran (its length, its last loss, its wall time, sums over its timed windows): a
# throughput-only run times the same windows as a whole run, but fewer of them, so these are not the
# configuration's figures (search/reports/choose.py takes them from its whole runs only).
RUN_LENGTH_METRICS = frozenset({
    "samples_trained", "steps", "train_wall_s", "train_loss_final", "eval_wall_s", "trial_wall_s", "timed_samples",
    "throughput_windows", "timed_start_unix_s", "timed_end_unix_s", "cpu_util_percent_mean", "energy_j",
    "energy_j_from_power", "energy_j_from_instant_power", "gpu_samples", "gpu_window_s", "gpu_timed_intervals"})
THROUGHPUT_ONLY = "train.throughput_only=true"
# In MLflow, a copied metric is logged under its name with this suffix (val_accuracy_of_same_maths): MLflow's
# `val_accuracy` is always what the run itself measured. Optuna keeps the copy under its own name: the sampler, the
# answer, the tables and export score the trial with it.
OF_SAME_MATHS = "_of_same_maths"


def maths_key(params: Mapping[str, Any]) -> tuple:
    return maths_of(tuple(sorted((k, repr(v)) for k, v in params.items())))


def maths_of(configuration: tuple) -> tuple:
    """A configuration's key (sorted (knob, repr(value)) pairs, as no_repeat.configuration_key) less its
    speed-only knobs: its maths."""
    return tuple(item for item in configuration if item[0] not in SPEED_ONLY)


def trained_fully(trial: optuna.trial.FrozenTrial) -> bool:
    """A trial that trained its whole budget at the study's own seed and was evaluated."""
    return (trial.state == TrialState.COMPLETE and outcome(trial) == OK
            and ACCURACY_FROM_ATTR not in trial.user_attrs and SEED_ATTR not in trial.user_attrs
            and "val_accuracy" in metrics(trial))


def accuracy_source(study: optuna.Study, params: Mapping[str, Any], but: int | None = None) -> int | None:
    """The first trial that trained these maths fully, or None."""
    want = maths_key(params)
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.number != but and trained_fully(t) and maths_key(t.params) == want:
            return t.number
    return None


def staged(study: optuna.Study, trial: optuna.Trial, enabled: bool) -> list[str]:
    """The overrides that make this trial throughput-only, or none: the trial trains fully when staging
    is off, when it was enqueued for itself (the baseline, a seed check, a retry, nightly's repeats; the
    confirmation's rounds are timed), or when nothing with its maths trained yet."""
    if not enabled or SEED_ATTR in trial.user_attrs:
        return []
    if enqueued_as_asked(study, trial) and role(trial) != CONFIRM:
        return []  # the baseline, a retry, nightly's repeats: measured as they were asked for, in full
    source = trial.user_attrs.get(ACCURACY_FROM_ATTR)
    if source is None:
        source = accuracy_source(study, trial.params, but=trial.number)
    if source is None:
        return []
    trial.set_user_attr(ACCURACY_FROM_ATTR, int(source))
    return [THROUGHPUT_ONLY]


def with_inherited_accuracy(study: optuna.Study, trial: optuna.Trial, result: Any) -> Any:
    """A throughput-only trial's result, with the accuracy of the trial it takes it from."""
    source = trial.user_attrs.get(ACCURACY_FROM_ATTR)
    if source is None or not isinstance(result, Mapping) or result.get("outcome") != "ok":
        return result
    inherited = metrics(study.get_trials(deepcopy=False)[int(source)])
    merged = dict(result)
    merged["metrics"] = {**result.get("metrics", {}), **{k: inherited[k] for k in INHERITED if k in inherited}}
    return merged


def logged_metrics(metrics: Mapping[str, float], attrs: Mapping[str, Any]) -> dict[str, float]:
    """The metrics as the trial's MLflow run shows them: a throughput-only trial's (search.accuracy_from in
    `attrs`) copied accuracy and loss as val_accuracy_of_same_maths and val_loss_of_same_maths."""
    if ACCURACY_FROM_ATTR not in attrs:
        return dict(metrics)
    return {f"{k}{OF_SAME_MATHS}" if k in INHERITED else k: v for k, v in metrics.items()}


def staging_applies(plan: Any, jobs: Any) -> bool:
    """This package's trials (not a user's function, which ignores train.throughput_only), scored on val_accuracy, with nothing that needs the whole run timed or evaluated
    (time to accuracy)."""
    metrics = set(plan.metrics or []) | {c.metric for c in plan.constraints}
    return jobs.runs_our_trials() and "val_accuracy" in metrics and "time_to_accuracy_s" not in metrics \
        and OmegaConf.select(jobs.config, "train.target_val_accuracy", default=None) is None \
        and OmegaConf.select(jobs.config, "objective.callable", default=None) is None  # a function trains its own way
