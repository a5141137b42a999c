"""Planning a sweep: everything that can be wrong with the input is checked
here, before a study, an MLflow run or an output directory exists; a
problem is one line and exit status 2 (search/errors.py).

The plan fixes the space (less what this machine cannot run and what breaks
a rule with a fixed value), the metrics and their directions, the
constraints, the study, the sampler, the early-stopping mode and the device
slots.
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from search.errors import BadInput
from search.measure import gpu_sharing
from search.measure.machine import gpus, machine_hardware
from search.sweep.batch_probe import ProbeFailed, bound_batch_size, probe_overrides
from search.sweep.combinations import fit_to_rules, parse_probes
from search.sweep.constraints import Constraint, parse_constraints
from search.sweep.early_stopping import choose_mode, make_pruner
from search.sweep.hooks import SweepHooks
from search.sweep.jobs import Jobs
from search.sweep.metric_names import check_declared, declared_by, named_metrics, value_names
from search.sweep.preflight import check_tracking_uri
from search.sweep.settings import check_config, checked_trial
from search.sweep.space import Space, build_space, keep_applied, parse_overrides, to_override
from search.sweep.study import DEFAULT_STORAGE, check_storage, make_sampler, normalize_directions, open_storage
from search.sweep.sweep_settings import BUILT_IN_DIRECTION, BUILT_IN_METRICS, SweepSettings, given_settings
from search.tracking.mlflow_runs import flatten
from search.trial import slots as device_slots
from search.trial.isolate import run_isolated

ACCURACY_METRICS = ("val_accuracy", "val_loss", "time_to_accuracy_s")


@dataclass
class Plan:
    space: Space
    directions: list[str]
    metrics: list[str] | None  # hydra.sweeper.metrics, less what the workload cannot measure; None: the task's values
    constraints: list[Constraint]
    study_name: str
    storage: Any
    sampler: optuna.samplers.BaseSampler
    early_stopping: str = "off"  # pruner | staged | off (search/sweep/early_stopping.py)
    pruner: Any = None
    slots: list[device_slots.Slot] | None = None  # None: another launcher, batches of n_jobs
    confirm_metrics: list[str] | None = None  # names the first ok trial must report (search/sweep/metric_names.py)
    for_answer: bool = False  # searching for the answer (docs/answer.md): set once, by the sweeper, with the baseline
    hardware: Any = None  # the machine as this package's trials see it (objectives/hardware.py); None: a user's app
    # notes on the space ("never proposed together ..."), printed by the sweeper once the last check (the resumed
    # study's) passed: not before a refusal's one line
    said: list[str] = field(default_factory=list)


def _check_attributable(trials_per_gpu: int, metrics: list[str] | None, constraints: list[Constraint]) -> None:
    """A trial that shared its GPU has no energy, power or utilisation figures (search/measure/gpu_sharing.py):
    a sweep scoring one of them with trials sharing GPUs would find nearly every trial without it."""
    scored = [*(metrics or []), *(c.metric for c in constraints)]
    shared = [m for m in scored if m.startswith(gpu_sharing.LEFT_OUT_WHEN_SHARED)]
    if trials_per_gpu > 1 and shared:
        raise BadInput(f"hydra.sweeper.trials_per_gpu must be 1 when the sweep scores {', '.join(shared)} (trials "
                       f"sharing a GPU get no energy, power or utilisation figures: NVML reads the GPU, not the "
                       f"trial); got {trials_per_gpu}; fix: hydra.sweeper.trials_per_gpu=1")


def _as_trials_see_it(hardware: Any, settings: SweepSettings) -> tuple[Any, str | None]:
    """The machine as this sweep's trials get it: a trial's GPUs are distinct device slots' GPUs, so
    with ``hydra.sweeper.slots`` below the visible GPUs no trial gets more than the slots hold (a larger
    ``parallel.devices`` was started on fewer GPUs and ended infeasible, trial after trial)."""
    if not hardware.gpu_count:
        return hardware, None
    slots = device_slots.make_slots(settings.slots, settings.trials_per_gpu, hardware.gpu_count)
    usable = len({slot.gpu for slot in slots})
    if usable >= hardware.gpu_count:
        return hardware, None
    return dataclasses.replace(hardware, gpu_count=usable), (
        f"note: hydra.sweeper.slots={settings.slots} gives trials {usable} of the {hardware.gpu_count} visible GPUs, "
        f"so a trial runs on at most {usable} (parallel.devices); more: hydra.sweeper.slots=auto")


def plan_sweep(settings: SweepSettings, jobs: Jobs, hooks: SweepHooks, sweep_dir: Path, arguments: list[str]) -> Plan:
    check_config(jobs.config, "hydra.sweeper")  # the numeric settings (search/sweep/settings.py)
    pruner = make_pruner(settings.pruner)
    space = build_space(settings.params, arguments)
    measures_accuracy, probed, built, hardware = True, [], None, None
    said: list[str] = []  # what the space lost or may not combine: printed once every check passed
    if jobs.runs_our_trials():
        space = _reproducible(space, jobs)
        probed = _check_knob_values(jobs, space)  # first: an unknown value is wrong everywhere
        built = _check_objective(probed[0].objective)
        if getattr(probed[0].objective, "callable", None):  # a function applies what it declares (objective.knobs)
            space, line = keep_applied(space, probed[0].objective.knobs,
                                       f"objective.callable {probed[0].objective.callable}",
                                       flatten(jobs.compose_trial(space.fixed_overrides)))
            said += [line] if line else []
        measures_accuracy = bool(probed[0].objective.measures_accuracy)
        hardware, line = _as_trials_see_it(machine_hardware(), settings) if jobs.run_here() \
            else (machine_hardware(), None)
        space, notes = fit_to_rules(space, probed[0], hardware)  # search/sweep/combinations.py
        said += ([line] if line else []) + notes
    else:
        for extra in [[]] + [[to_override(k, getattr(d, "choices", [getattr(d, "low", None)])[0])]
                             for k, d in space.distributions.items()]:
            jobs.compose_trial(space.fixed_overrides + extra)
    metrics, directions = _metrics_and_directions(settings, jobs, measures_accuracy)
    if not jobs.runs_our_trials():
        jobs.value_names = metrics  # the numbers a user's task returns get these names (search/sweep/jobs.py)
        if settings.storage is None:
            print(f"storage: null keeps the study in ./{DEFAULT_STORAGE}, and a re-run of the same study resumes it "
                  f"(hydra-optuna-sweeper kept it in memory); a fresh study: another hydra.sweeper.study_name",
                  flush=True)
    constraints = parse_constraints(settings.constraints)
    _check_attributable(settings.trials_per_gpu, metrics, constraints)
    named = named_metrics(metrics, constraints, hooks.named_metrics())
    confirm = check_declared(named, declared_by(probed), jobs.default_study_name())
    if built is not None:
        from objectives.custom_check import check_scored

        _refuse_config_error(lambda: check_scored(built, named))
    _check_writable(sweep_dir)
    check_storage(settings.storage)  # every external dependency answers before anything is created
    check_tracking_uri()
    if settings.batch_size_probe and jobs.runs_our_trials():
        space = _probe_batch_size(jobs, space)  # last: the cheap checks above fail first
    sampler = make_sampler(settings.sampler, settings.seed, space.distributions)
    _check_one_metric_sampler(sampler, metrics, directions)
    name = settings.study_name or jobs.default_study_name()
    storage = open_storage(settings.storage)  # creates the journal file: after every check
    # Only this package's trials report a curve and run the probe, and only with an accuracy to report.
    trains_here = jobs.runs_our_trials() and measures_accuracy
    mode = choose_mode(settings.early_stopping and trains_here, metrics, directions, pruner)
    slots = device_slots.make_slots(settings.slots, settings.trials_per_gpu, gpus().count) if jobs.run_here() else None
    if slots is not None and settings.n_jobs > 1:  # read by other launchers only (docs/scale.md)
        print(f"note: hydra.sweeper.n_jobs={settings.n_jobs} is for other Hydra launchers (joblib, submitit); here "
              f"{len(slots)} trial(s) run at once, one per device slot: hydra.sweeper.slots sets how many", flush=True)
    return Plan(space, directions, metrics, constraints, name, storage, sampler, mode, pruner, slots, confirm,
                said=said, hardware=hardware)


def _check_objective(objective: Any) -> Any:
    """A custom objective's function and `_target_`s are found here, once, and its model and datasets built once
    on the CPU (objectives/custom_check.py): misspelt or misshapen, every trial would crash or end infeasible
    with the same line after the study and MLflow runs exist. Returns what the build showed (None: nothing built)."""
    from objectives.instantiate import check_objective

    _refuse_config_error(lambda: check_objective(objective))
    if getattr(objective, "model", None) is None:  # a built-in objective or a function: nothing to build, no torch
        return None
    from objectives.custom_check import check_custom

    return _refuse_config_error(lambda: check_custom(objective))


def _refuse_config_error(check: Any) -> Any:
    from objectives import ConfigError

    try:
        return check()
    except ConfigError as err:
        raise BadInput(str(err)) from None


def _check_one_metric_sampler(sampler: optuna.samplers.BaseSampler, metrics: list[str], directions: list[str]) -> None:
    """Optuna's CMA-ES optimises one value, and says so only at its first model-based ask, mid-sweep."""
    if isinstance(sampler, optuna.samplers.CmaEsSampler) and len(metrics) > 1:
        raise BadInput(f"hydra/sweeper/sampler=cmaes optimises one metric; got {len(metrics)} ({', '.join(metrics)}); "
                       f"fix: hydra.sweeper.metrics=[{metrics[0]}] hydra.sweeper.direction=[{directions[0]}] (your "
                       f"configuration's accuracy still sets the answer's floor), or hydra/sweeper/sampler=gp")


def _reproducible(space: Space, jobs: Jobs) -> Space:
    """Each trial's overrides, which `python -m search export` writes down, also name what the
    command line left implicit: the objective a default chose, and the config search path a
    file-based objective was found on (`hydra.searchpath`, made absolute so that the export runs
    from any directory, and a `--config-dir`)."""
    given = {o.key_or_group for o in parse_overrides(space.fixed_overrides)}
    extra = []
    choice = jobs.config.hydra.runtime.choices.get("objective")
    if choice and "objective" not in given:
        extra.append(f"objective={choice}")
    searchpath = [_absolute(str(p)) for p in jobs.config.hydra.searchpath or []]
    searchpath += [f"{s.schema}://{s.path}" for s in jobs.config.hydra.runtime.get("config_sources") or []
                   if s.provider == "command-line"]  # --config-dir (-cd): on the search path as well
    if searchpath and "hydra.searchpath" not in given:
        extra.append(f"hydra.searchpath=[{','.join(searchpath)}]")
    return dataclasses.replace(space, fixed_overrides=extra + space.fixed_overrides)


def _absolute(entry: str) -> str:
    scheme, sep, path = entry.partition("://")
    if scheme != "file" or not sep or os.path.isabs(path):
        return entry
    return f"file://{os.path.abspath(path)}"


def _check_knob_values(jobs: Jobs, space: Space) -> list[Any]:
    """Compose the config at every categorical value and each numeric bound,
    and validate each value the way the trial will, so a bad value never
    becomes a trial. Returns the parsed configs (objectives.TrialConfig), the
    fixed settings first; the rules that tie values together are applied to
    the space itself (search/sweep/combinations.py)."""
    from objectives.config import parse_values

    return parse_probes(space, lambda extra: parse_values(checked_trial(
        jobs.compose_trial(space.fixed_overrides + extra))))


def _metrics_and_directions(settings: SweepSettings, jobs: Jobs,
                            measures_accuracy: bool) -> tuple[list[str] | None, list[str]]:
    """hydra.sweeper.metrics, less the accuracy ones when the workload measures
    no accuracy (throughput-only workloads): said once, never invented. For a
    user's own task, what it returns (search/sweep/metric_names.py)."""
    if not jobs.runs_our_trials():
        return _own_task_metrics(settings, jobs)
    metrics = settings.metrics
    directions = normalize_directions(settings.direction, metrics)
    if metrics is None or measures_accuracy:
        return metrics, directions
    name = jobs.config.objective.get("name")
    kept = [(m, d) for m, d in zip(metrics, directions) if m not in ACCURACY_METRICS]
    if not kept:
        raise BadInput(f"hydra.sweeper.metrics must name a metric objective {name!r} reports, and it measures no "
                       f"accuracy; got {metrics}; fix: hydra.sweeper.metrics=[throughput_samples_per_s] "
                       f"hydra.sweeper.direction=maximize")
    if len(kept) < len(metrics):
        print(f"objective {name!r} measures no accuracy: single-metric sweep on "
              f"{', '.join(m for m, _ in kept)}", flush=True)
    return [m for m, _ in kept], [d for _, d in kept]


def _own_task_metrics(settings: SweepSettings, jobs: Jobs) -> tuple[list[str], list[str]]:
    """A user's own Hydra task, as the old hydra-optuna-sweeper ran it: one value per direction
    given (named `value`, or `value_0`, `value_1`, ...), minimized when no direction is given (that
    plugin's default); the metrics named by hydra.sweeper.metrics when given. The sweeper's own
    defaults (throughput_samples_per_s and val_accuracy, maximized) are this package's trials' only."""
    given = given_settings(jobs.hydra_context, jobs.config, ("metrics", "objectives", "direction"))
    if given is None:  # cannot tell: a value other than the sweeper's default was given
        given = {k for k, v, default in [("metrics", settings.metrics, BUILT_IN_METRICS),
                                         ("direction", settings.direction, BUILT_IN_DIRECTION)] if v != default}
    metrics = settings.metrics if given & {"metrics", "objectives"} else None
    if "direction" in given:
        directions = normalize_directions(settings.direction, metrics)
    else:
        directions = ["minimize"] * len(metrics or [None])
    return metrics or value_names(len(directions)), directions


def _probe_batch_size(jobs: Jobs, space: Space) -> Space:
    """Bound batch_size by what fits, measured in isolated probe trials before anything is created."""
    from search.trial.typed_config import parse_trial

    base = parse_trial(jobs.compose_trial(space.fixed_overrides))
    micro_batches = base.parallel.devices * base.parallel.grad_accum if base is not None else 1

    def run(batch_size: int) -> dict[str, Any]:
        cfg = jobs.compose_trial(space.fixed_overrides + probe_overrides(batch_size, micro_batches))
        return run_isolated(cfg, timeout_s=float(cfg["trial"]["timeout_s"]), parsed=parse_trial(cfg))

    try:
        space, line = bound_batch_size(space, run)
    except ProbeFailed as err:
        raise BadInput(f"the batch-size probe needs its trials to end ok or out of memory; {err}; "
                       f"fix: run one trial at that configuration (python -m search run ...) to see why") from None
    print(line, flush=True)
    return space


def _check_writable(sweep_dir: Path) -> None:
    """Probe by making (and removing) a directory where the sweep's would go:
    permission bits alone say yes to root on read-only or virtual filesystems."""
    existing = next(p for p in (sweep_dir.absolute(), *sweep_dir.absolute().parents) if p.exists())
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".search-probe-", dir=existing))
    except OSError:
        raise BadInput(f"the sweep's output directory must be writable; got {sweep_dir} ({existing} is not writable); "
                       f"fix: hydra.sweep.dir=<a writable directory>") from None
