"""Metric names in the sweep's settings must be metrics a trial reports.

`hydra.sweeper.metrics`, the metrics of `hydra.sweeper.constraints` and
`hydra.sweeper.nightly.metric` name trial metrics. A name no trial reports
is a typo that would make every trial infeasible (exit 0, nothing learnt),
so it is refused before the first trial, with the names the workload does
report: those its configuration declares (objectives/metrics.py) and those
the sweep measures around every trial (search/trial/isolate.py). A user's own
function (`objective.callable`, or another Hydra app) declares nothing: its
first trial that ends ok is checked instead, and a name it did not report
stops the sweep with exit status 2.

A user's Hydra task that returns a number (or a list of numbers), as tasks
written for the old hydra-optuna-sweeper do, has its values named: by
`hydra.sweeper.metrics` when given, else `value` (one) or `value_0`,
`value_1`, ... (several), the names Optuna's own MLflow callback gives
them. Named, they are metrics like any other: in MLflow, in the
progress line and in the final table (`named_values`).
"""
from __future__ import annotations

import dataclasses
import difflib
import math
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

from search.sweep.constraints import Constraint
from search.errors import BadInput

GPU_PREFIXES = ("gpu_", "energy_j")
_SWEEP_METRICS = ("peak_pss_tree_bytes", "cpu_util_percent_mean", "cpu_util_percent_max", "trial_wall_s", "mfu")


@lru_cache(maxsize=1)
def sweep_metrics() -> frozenset[str]:
    """What the sweep adds to every trial's metrics: memory, CPU, wall time, MFU, and on a
    GPU what NVML sampling summarises (the names taken from the summary code itself)."""
    from search.measure import nvml
    from search.measure.gpu_telemetry import summarize

    def reading(t: float) -> nvml.GpuReading:
        fields = {f.name: 1.0 for f in dataclasses.fields(nvml.GpuReading)}
        fields.update(index=0, time_unix_s=t, energy_mj=1000.0 * t, throttle={f: False for f in nvml.THROTTLE_FLAGS})
        return nvml.GpuReading(**fields)

    readings = [reading(0.0), reading(1.0)]
    return frozenset(_SWEEP_METRICS) | frozenset(summarize(readings, None, 1.0))


def named_metrics(metric_names: Sequence[str] | None, constraints: Sequence[Constraint],
                  others: Mapping[str, str]) -> dict[str, str]:
    """Metric name -> the setting that names it; `others` are the sweep hooks' (hydra.sweeper.nightly.metric)."""
    named: dict[str, str] = dict(others)
    for c in constraints:
        named[c.metric] = "hydra.sweeper.constraints"
    for name in metric_names or []:
        named[name] = "hydra.sweeper.metrics"
    return named


def check_declared(named: Mapping[str, str], declared: Iterable[str] | None, workload: str) -> list[str]:
    """Refuse a name the workload never reports; return the names its first trial must
    confirm (all of them when the workload declares nothing)."""
    if declared is None:
        return list(named)
    reported = frozenset(declared) | sweep_metrics()
    for name, setting in named.items():
        if name not in reported:
            near = difflib.get_close_matches(name, sorted(reported), n=1)
            fix = (f"name {near[0]!r}, the closest reported metric" if near
                   else f"e.g. {setting}={_example(setting, reported)}")
            raise BadInput(f"{setting} must name metrics that objective {workload!r} reports; got {name!r}, which it "
                           f"never reports; it reports {_listing(reported)}; fix: {fix}")
    return []


def declared_by(configs: Sequence[Any]) -> frozenset[str] | None:
    """The union over the configurations the space reaches (objectives.TrialConfig);
    None when a user's function runs (it declares nothing) or no config was parsed."""
    from objectives.metrics import reported_metrics

    declared = [reported_metrics(cfg) for cfg in configs]
    if not declared or any(d is None for d in declared):
        return None
    return frozenset().union(*declared)


def ended_ok(result: Any) -> bool:
    return isinstance(result, Mapping) and str(result.get("outcome", "ok")) == "ok"


def unreported(result: Mapping[str, Any], wanted: Sequence[str]) -> str | None:
    """For the first ok trial of a workload that declares nothing: None when it reported
    every wanted name, else the one-line refusal naming what it did report."""
    metrics = result.get("metrics", result)
    got = sorted(str(k) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool))
    missing = [name for name in wanted if name not in got]
    if not missing:
        return None
    return (f"the metrics the sweep names must be reported by the objective; its first trial reported "
            f"{', '.join(got) or 'no metrics'}, not {', '.join(missing)}; fix: name reported metrics in "
            f"hydra.sweeper.metrics and constraints, or report {', '.join(missing)} from the objective")


def value_names(count: int) -> list[str]:
    """Names of the values a task returns when hydra.sweeper.metrics names none."""
    return ["value"] if count == 1 else [f"value_{i}" for i in range(count)]


def named_values(value: Any, names: Sequence[str]) -> Any:
    """A task's number or list of numbers as a result with named metrics
    (`{"metrics": {name: value}}`); a dict, or anything that is not as many
    numbers as names, as is (search/sweep/outcome.py says what is wrong with it).
    A non-finite value makes the trial `diverged`, as in this package's trials."""
    if isinstance(value, (Mapping, str, bytes)):
        return value
    try:
        values = [float(value)]
    except TypeError:
        try:
            values = [float(v) for v in value]
        except (TypeError, ValueError):
            return value
    except ValueError:
        return value
    if len(values) != len(names):
        return value
    metrics = dict(zip(names, values))
    bad = [n for n, v in metrics.items() if not math.isfinite(v)]
    if bad:
        return {"outcome": "diverged", "reason": f"the task returned non-finite {', '.join(bad)}",
                "metrics": {n: v for n, v in metrics.items() if n not in bad}}
    return {"metrics": metrics}


def _listing(reported: frozenset[str]) -> str:
    plain = sorted(n for n in reported if not n.startswith(GPU_PREFIXES))
    return ", ".join(plain) + ", and on an NVIDIA GPU gpu_* and energy_j* (docs/objectives.md)"


def _example(setting: str, reported: frozenset[str]) -> str:
    """A value of `setting` naming metrics the workload reports: a constraint on its accuracy when it reports one,
    else on a loss (resnet reports no val_accuracy: the example must not be the rule just refused)."""
    rules = (("val_accuracy", ">= 0.97"), ("val_loss", "<= 0.1"), ("train_loss_final", "<= 1.0"))
    quality = next((f"'{m} {op}'" for m, op in rules if m in reported), "'throughput_samples_per_s >= 100'")
    return {"hydra.sweeper.constraints": f"[{quality}]",
            "hydra.sweeper.nightly.metric": "throughput_samples_per_s"}.get(setting, "[throughput_samples_per_s]")
