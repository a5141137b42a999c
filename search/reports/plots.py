"""The plots of a study, made by Optuna's own visualization module: each as
a PNG (optuna.visualization.matplotlib, no browser needed) and all of them
in one interactive HTML page (optuna.visualization, plotly, with plotly.js
inlined once so the page works offline).

Plotted: the Pareto front (throughput vs. accuracy), and per optimised metric the
parameter importances, the optimisation history and the knob-by-knob effect
(slice plot). Only trials that ran `ok` and are feasible are drawn: the
placeholder values Optuna holds for out-of-memory or infeasible trials
would otherwise squash every axis. The Pareto front has one point per
configuration, at the median of its runs, as the terminal's front table
does; the other plots draw every run. Trial numbers are the study's.
"""
from __future__ import annotations

import html
import importlib
import logging
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from search.reports.choose import measured_ok
from search.reports.tables import configuration_rows
from search.sweep.study import study_metrics
from search.tracking.mlflow_client import log_report


@dataclass
class Plots:
    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "no plot of importances of val_accuracy: <why>"


def _copy(study: optuna.Study, kept: Mapping[int, list[float]]) -> optuna.Study:
    """An in-memory copy of the study, trial numbers and all: the trials numbered in `kept`, with those values;
    every other trial a FAIL placeholder, which no plot draws. (Optuna numbers a study's trials by their
    order, and the numbers the plots show must be the study's, as in the terminal and MLflow.)"""
    copy = optuna.create_study(directions=study.directions, study_name=study.study_name)
    trials = []
    for t in study.get_trials(deepcopy=False):
        if t.number not in kept:
            trials.append(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL))
        elif kept[t.number] == t.values:
            trials.append(t)
        else:
            t = deepcopy(t)
            t.values = kept[t.number]
            trials.append(t)
    copy.add_trials(trials)
    return copy


def _measured(study: optuna.Study) -> optuna.Study:
    """The trials worth drawing: every run that ran ok and is feasible."""
    return _copy(study, {t.number: t.values for t in study.get_trials(deepcopy=False) if measured_ok(t)})


def _configurations(study: optuna.Study) -> optuna.Study:
    """One point per configuration trained at the study's seed, as the terminal's front table has it: its
    first run, at the median of its runs (search/reports/tables.py configuration_rows). The confirmation's
    rounds and the second-seed checks are not points of their own."""
    return _copy(study, {row.trial.number: row.values for row in configuration_rows(study)
                         if measured_ok(row.trial)})


def _figures(study: optuna.Study, metric_names: Sequence[str]) -> list[tuple[str, str, Callable[[Any], Any]]]:
    """(file stem, title, make(module)) where module is optuna.visualization or its matplotlib twin."""
    out: list[tuple[str, str, Callable[[Any], Any]]] = []
    if len(study.directions) > 1:
        front = _configurations(study)
        out.append(("pareto_front", "Pareto front (one point per configuration, the median of its runs)",
                    lambda v: v.plot_pareto_front(front, target_names=list(metric_names))))
    for i, name in enumerate(metric_names):
        target = (lambda t, i=i: t.values[i]) if len(study.directions) > 1 else None
        kw = {"target": target, "target_name": name}
        importances = {"evaluator": _importances_once(), "target_name": name, "target": (
            _lower_is_better(i, study.directions[i]) if len(study.directions) > 1 else None)}
        out += [
            (f"importances_{name}", f"Knob importances for {name}",
             lambda v, kw=importances: v.plot_param_importances(study, **kw)),
            (f"history_{name}", f"Optimisation history of {name}", lambda v, kw=kw: v.plot_optimization_history(study, **kw)),
            (f"knob_effect_{name}", f"Knob-by-knob effect on {name}", lambda v, kw=kw: v.plot_slice(study, **kw)),
        ]
    return out


def _lower_is_better(index: int, direction: optuna.study.StudyDirection) -> Callable[[Any], float]:
    """The importances' target for one of several metrics: Optuna's default evaluator (PED-ANOVA)
    ranks knobs by how much they matter for reaching *low* target values, so a maximised metric
    (throughput, accuracy) is negated, or the plot would rank what makes a trial slow."""
    sign = -1.0 if direction == optuna.study.StudyDirection.MAXIMIZE else 1.0
    return lambda t: sign * t.values[index]


def _importances_once() -> Any:
    """Optuna's default evaluator, run once for both drawings of the same plot (HTML and PNG). Made here, not
    at import: optuna.importance imports scikit-learn (a second), which a sweep needs only for its report."""
    import optuna.importance

    class ImportancesOnce(optuna.importance.BaseImportanceEvaluator):
        def __init__(self) -> None:
            self._result: dict[str, float] | None = None

        def evaluate(self, study: optuna.Study, params: list[str] | None = None, *,
                     target: Callable[[Any], float] | None = None) -> dict[str, float]:
            if self._result is None:
                self._result = optuna.importance.PedAnovaImportanceEvaluator().evaluate(study, params, target=target)
            return dict(self._result)

    return ImportancesOnce()


PRELOAD = ("matplotlib", "matplotlib.pyplot", "optuna.importance", "optuna.visualization",
           "optuna.visualization.matplotlib")


def preload(go_on: Callable[[], bool] = lambda: True) -> None:
    """The plotting modules imported ahead, one after another while `go_on()` says so (the sweep does it on a
    background thread while its trials run), so the sweep's end is not spent importing them:
    optuna.importance (scikit-learn, through fANOVA) alone takes about 1 s on 2 cores."""
    for module in PRELOAD:
        if not go_on():
            return
        importlib.import_module(module)
        if module == "matplotlib":
            importlib.import_module(module).use("Agg")


@contextmanager
def _quiet_matplotlib() -> Iterator[None]:
    """matplotlib's log records ("Using categorical units to plot a list of strings that are all
    parsable as floats", the font cache) below ERROR stay out of the sweep's output: under Hydra they
    reach the root logger's handlers (an app's console, a job's log). Its warnings are Optuna's
    "experimental" ones. Both are restored after."""
    logger = logging.getLogger("matplotlib")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def write_plots(study: optuna.Study, metric_names: Sequence[str], out_dir: Path) -> Plots:
    with _quiet_matplotlib():
        return _write_plots(study, metric_names, out_dir)


def _write_plots(study: optuna.Study, metric_names: Sequence[str], out_dir: Path) -> Plots:
    out_dir.mkdir(parents=True, exist_ok=True)
    measured = _measured(study)
    plots = Plots()
    sections: list[str] = []
    ran = sum(measured_ok(t) for t in measured.get_trials(deepcopy=False))
    if ran < 2:  # before the plotting modules: a sweep importing them ahead is not waited for, for nothing
        plots.skipped.append(f"no plots yet: they need 2 trials that ran ok and met the constraints, the study has "
                             f"{ran}")
        return plots
    preload()
    import matplotlib.pyplot as plt
    import optuna.visualization as interactive
    import optuna.visualization.matplotlib as static

    for stem, title, make in _figures(measured, metric_names):
        try:
            figure = make(interactive)
            axes = make(static)
        except Exception as err:  # e.g. importances need two distinct values of some knob
            plots.skipped.append(f"no plot of {title}: {' '.join(str(err).split())[:160]}")
            continue
        wrap_dotted_labels(axes)
        first = axes.flat[0] if hasattr(axes, "flat") else axes
        first.figure.savefig(out_dir / f"{stem}.png", dpi=100, bbox_inches="tight")
        plt.close(first.figure)
        plots.files.append(out_dir / f"{stem}.png")
        figure.update_layout(title=title)
        sections.append(figure.to_html(full_html=False, include_plotlyjs=not sections))
    page = out_dir / "plots.html"
    page.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(study.study_name)}"
                    f"</title></head><body><h1>Study {html.escape(study.study_name)}</h1>{''.join(sections)}"
                    f"</body></html>")
    plots.files.append(page)
    return plots


def wrap_dotted_labels(axes: Any) -> None:
    """A knob's dotted name on an x axis wraps after its dots: the slice plot sets one panel per knob side by
    side, and `memory.activation_checkpointing` ran into its neighbours' names (a GPU sweep's report)."""
    for ax in getattr(axes, "flat", [axes]):
        label = ax.get_xlabel()
        if "." in label and "\n" not in label:
            ax.set_xlabel(label.replace(".", ".\n"))


def write_report(study: optuna.Study, out_dir: Path, run_id: str | None) -> list[Path]:
    """Plots to out_dir and to the MLflow run; returns the files written."""
    plots = write_plots(study, study_metrics(study), out_dir)
    for why in plots.skipped:
        print(f"report: {why}", flush=True)
    if plots.files:
        print(f"report: {len(plots.files)} files in {out_dir}", flush=True)
        problem = log_report(run_id, plots.files)
        if problem:
            print(f"warning: the report is not in MLflow ({problem}); it is on disk", flush=True)
    return plots.files
