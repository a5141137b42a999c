"""Tables for the terminal: the Pareto front of a study, one trial's result."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import optuna
from rich.console import Console
from rich.table import Table

from search.sweep.outcome import is_feasible

_SHOWN_METRICS = ("throughput_cv", "val_loss", "peak_pss_tree_bytes", "trial_wall_s")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def front_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The Pareto front (several metrics) or the best five (one metric)."""
    if len(study.directions) > 1:
        return sorted(study.best_trials, key=lambda t: t.values[0], reverse=True)
    done = [t for t in study.get_trials(deepcopy=False)
            if t.state == optuna.trial.TrialState.COMPLETE and is_feasible(t)]
    reverse = study.direction == optuna.study.StudyDirection.MAXIMIZE
    return sorted(done, key=lambda t: t.value, reverse=reverse)[:5]


def front_table(study: optuna.Study, metric_names: Sequence[str]) -> Table:
    trials = front_trials(study)
    title = "Pareto front" if len(study.directions) > 1 else "Best trials"
    table = Table(title=f"{title} of study {study.study_name!r} ({len(trials)} trials)")
    table.add_column("trial", justify="right")
    for name, direction in zip(metric_names, study.directions):
        table.add_column(f"{name} ({direction.name.lower()})", justify="right")
    knobs = sorted({k for t in trials for k in t.params})
    for key in _SHOWN_METRICS:
        table.add_column(key, justify="right")
    for knob in knobs:
        table.add_column(knob)
    for t in trials:
        metrics = t.user_attrs.get("metrics", {})
        table.add_row(
            str(t.number),
            *[_fmt(v) for v in t.values],
            *[_fmt(metrics.get(k, "")) for k in _SHOWN_METRICS],
            *[_fmt(t.params.get(k, "")) for k in knobs],
        )
    return table


def console() -> Console:
    """A terminal's own width; a log file or pipe gets a width that fits the tables."""
    plain = Console()
    return plain if plain.is_terminal else Console(width=220)


def print_front(study: optuna.Study, metric_names: Sequence[str]) -> None:
    console().print(front_table(study, metric_names))


def print_single(job_cfg: Mapping[str, Any], result: Mapping[str, Any]) -> None:
    """`python -m search run`: one trial's outcome and figures."""
    table = Table(title=f"trial outcome: {result.get('outcome')}  {result.get('reason', '')}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in sorted(result.get("metrics", {}).items()):
        table.add_row(key, _fmt(value))
    for key, value in sorted(result.get("info", {}).items()):
        table.add_row(key, str(value))
    console().print(table)
