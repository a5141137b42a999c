"""Tables for the terminal: the Pareto front of a study, one trial's result.

The front table is narrow on purpose (80 columns): the trial, the optimised
metrics, the speedup over the baseline, and only the knobs whose value
differs from the baseline's: the user's own configuration (trials with user
attribute `search.trial_role` = `baseline`), else the study's first complete
trial. Every other figure and knob is in MLflow and the report. When a column
per knob does not fit the width, one wrapped column lists what each row
changes instead, so no knob is left out.
"""
from __future__ import annotations

import os
import statistics
import sys
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState
from rich.console import Console, Group
from rich.markup import escape
from rich.table import Table

from search.record import ANSWER_ATTR, BASELINE, MLFLOW_RUN_ID_ATTR, OK, SEED_ATTR, is_feasible, outcome, role
from search.reports.choose import key as config_key
from search.reports.labels import WARNINGS, fmt, knob_label, metric_label
from search.sweep.answer import Idle, no_idle
from search.sweep.staging import SPEED_ONLY

PIPE_WIDTH = 100  # a log file or pipe: the width the tables are laid out for
_SPEEDUP_METRICS = {"throughput_samples_per_s": 1, "throughput_tokens_per_s": 1, "time_to_accuracy_s": -1}


@dataclass(frozen=True)
class Row:
    """One configuration: its first run at the study's seed, and the medians of all its runs there."""

    trial: FrozenTrial
    values: list[float]
    runs: int


def configuration_rows(study: optuna.Study) -> list[Row]:
    """One row per configuration trained at the study's seed: its first run there (the search's), with the
    median of every objective over all its feasible runs there. The confirmation's rounds re-measure the
    contenders, and the luckiest of a configuration's runs must not stand for it (nor a round for the
    configuration the search trained). A run at another seed (the baseline's second, the answer's check) is
    another draw of a configuration's accuracy, not comparable with the others', so it is left out."""
    groups: dict[tuple, list[FrozenTrial]] = {}
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.COMPLETE and is_feasible(t) and SEED_ATTR not in t.user_attrs:
            groups.setdefault(config_key(t.params), []).append(t)
    return [Row(runs[0], [statistics.median(values) for values in zip(*(t.values for t in runs))], len(runs))
            for runs in groups.values()]


def front_rows(study: optuna.Study, rows: list[Row] | None = None) -> list[Row]:
    """The Pareto front (several metrics) or the best five (one metric) of the configurations trained at the
    study's seed (`rows`, configuration_rows' when None: one row per configuration, the median of its runs)."""
    rows = configuration_rows(study) if rows is None else rows
    if len(study.directions) > 1:
        signs = [1.0 if d == optuna.study.StudyDirection.MAXIMIZE else -1.0 for d in study.directions]
        points = [[s * v for s, v in zip(signs, r.values)] for r in rows]

        def beaten(mine: list[float]) -> bool:
            return any(all(o >= m for o, m in zip(other, mine)) and other != mine for other in points)

        return sorted((r for r, p in zip(rows, points) if not beaten(p)), key=lambda r: r.values[0], reverse=True)
    reverse = study.direction == optuna.study.StudyDirection.MAXIMIZE
    return sorted(rows, key=lambda r: r.values[0], reverse=reverse)[:5]


def front_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The first run of each configuration of the front (front_rows)."""
    return [r.trial for r in front_rows(study)]


def baseline_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The baseline's measurements that ran ok (the user's own configuration, measured more than once)."""
    return [t for t in study.get_trials(deepcopy=False)
            if role(t) == BASELINE and t.state == TrialState.COMPLETE and is_feasible(t)]


def reference_trial(study: optuna.Study) -> tuple[FrozenTrial | None, str]:
    """What the knobs are compared with, and what to call it: the baseline, else the first complete trial."""
    baseline = baseline_trials(study)
    if baseline:
        return baseline[0], "the baseline"
    first = next((t for t in study.get_trials(deepcopy=False)
                  if t.state == TrialState.COMPLETE and outcome(t, unrecorded=OK) == OK), None)
    return first, (f"trial {first.number}, the first complete one" if first is not None else "")


def compare_run_ids(study: optuna.Study) -> list[str]:
    """The MLflow runs (trial user attribute `mlflow_run_id`) of the baseline's measurements, then of the
    front: what the sweep's closing compare link puts side by side (search/tracking/mlflow_client.py)."""
    trials = baseline_trials(study) + front_trials(study)
    return list(dict.fromkeys(t.user_attrs[MLFLOW_RUN_ID_ATTR] for t in trials if t.user_attrs.get(MLFLOW_RUN_ID_ATTR)))


def compare_label(answered: bool, answer_is_yours: bool, has_baseline: bool, front_adds: bool = True) -> str:
    """What the closing compare link holds, in words: the answer's run, the baseline's, the front's. When the
    answer is your configuration its runs are the baseline's, named once; the front is named when it adds a
    run of its own (`front_adds`), not when it is only the answer or the baseline."""
    front = ["the front"] * front_adds
    if answered and answer_is_yours:
        return "; ".join(["the answer, your configuration"] + front)
    return ", ".join(["the answer"] * answered + ["the baseline"] * has_baseline + front) or "the front"


NO_EFFECT = "–"  # a knob cell whose value the row's other values leave without effect


def differing_knobs(trials: Sequence[FrozenTrial], reference: FrozenTrial | None, idle: Idle = no_idle,
                    answer: Mapping[str, Any] | None = None) -> list[str]:
    """Knobs some shown trial sets otherwise than `reference` (a value without effect, `idle`, is no value), in
    the order a narrow table keeps them: those the answer moves (its row reads whole), then those that change
    the trained model's maths (they explain the accuracy column), then the speed-only ones
    (search/sweep/staging.py), each in the study's order."""
    keys: list[str] = []
    for t in trials:
        keys += [k for k in t.params if k not in keys]
    if reference is None:
        return keys
    base = reference.params
    keys = [k for k in keys if any(_effective(t.params, k, idle) != _effective(base, k, idle) for t in trials)]
    moved = [k for k in keys if answer is not None and k in answer
             and _effective(answer, k, idle) != _effective(base, k, idle)]
    rest = [k for k in keys if k not in moved]
    return moved + [k for k in rest if k not in SPEED_ONLY] + [k for k in rest if k in SPEED_ONLY]


def _effective(params: Mapping[str, Any], key: str, idle: Idle) -> Any:
    return NO_EFFECT if key in idle(params) else params.get(key)


def baseline_value(rows: Sequence[Row], baseline: Sequence[FrozenTrial]) -> float | None:
    """What the `vs base` column divides by: the baseline configuration's row (configuration_rows), the median of
    its runs at the study's seed, the confirmation's rounds among them, as every other row's figure is. Its run at
    the next seed and a slow first run must not stand for it alone (the panel's speedup pairs it round by round)."""
    if not baseline:
        return None
    want = config_key(baseline[0].params)
    row = next((r for r in rows if config_key(r.trial.params) == want), None)
    return row.values[0] if row is not None else None


def speedup(name: str, value: float, base: float | None) -> str:
    """`1.84x` over the baseline's figure `base`, for throughput (higher is faster) or time to accuracy (lower)."""
    sign = _SPEEDUP_METRICS.get(name)
    if sign is None or base is None or base <= 0 or value <= 0:
        return ""
    return f"{value / base if sign > 0 else base / value:.2f}x"


def front_table(study: optuna.Study, metric_names: Sequence[str], width: int | None = None,
                idle: Idle = no_idle) -> Group:
    """The front in `width` columns (the console's when None): a title line, the table, notes under it. `idle`:
    the keys a configuration's other values leave without effect (Space.unused), shown as NO_EFFECT."""
    width = width or console().width
    every_row = configuration_rows(study)
    front = front_rows(study, every_row)
    baseline = baseline_trials(study)
    reference, called = reference_trial(study)
    title = "Pareto front" if len(study.directions) > 1 else "Best trials"
    table = Table()
    answer = study.user_attrs.get(ANSWER_ATTR)
    answer = answer if isinstance(answer, dict) else {}
    answer_key = config_key(answer["params"]) if answer.get("params") else None

    def is_answer(t: FrozenTrial) -> bool:
        return t.number in answer.get("trials", []) or config_key(t.params) == answer_key
    # The answer's configuration can fall off the front: re-measured by the confirmation, its median below a
    # lucky single run's; your configuration as the answer, beaten on both metrics by faster runs of less
    # accuracy than the floor allows. It is shown under the front all the same, so that the row the panel
    # names is always in the table.
    off_front = [] if answer_key is None or any(is_answer(r.trial) for r in front) \
        else [r for r in every_row if is_answer(r.trial)][:1]
    front = front + off_front
    trials = [r.trial for r in front]
    table.add_column("trial", justify="right", no_wrap=True)
    for name, direction in zip(metric_names, study.directions):
        arrow = "↑" if direction == optuna.study.StudyDirection.MAXIMIZE else "↓"
        table.add_column(f"{metric_label(name)} {arrow}", justify="right", no_wrap=True)
    primary = metric_names[0] if metric_names else ""
    base_value = baseline_value(every_row, baseline)
    with_speedup = base_value is not None and primary in _SPEEDUP_METRICS
    if with_speedup:
        table.add_column("vs base", justify="right", no_wrap=True)
    rows: list[list[str]] = []
    for r in front:
        rows.append([f"{r.trial.number}{' *' if is_answer(r.trial) else ''}", *[fmt(v) for v in r.values],
                     *([speedup(primary, r.values[0], base_value)] if with_speedup else [])])
    every = list(trials[0].params) if trials else []
    knobs = differing_knobs(trials, reference, idle, answer.get("params"))
    used = _width([str(c.header) for c in table.columns], rows)
    extra = [_width([knob_label(key, every)], [[fmt(t.params.get(key, ""))] for t in trials]) - 1 for key in knobs]
    # A column per knob when every knob that differs fits; else one column of what each row changes, wrapped,
    # so that no knob is left out (at 80 columns the knob columns showed the loader's and left out the
    # precision and model pruning that explained the accuracy column)
    as_columns = used + sum(extra) <= width
    shown = knobs if as_columns else []
    for key in shown:
        table.add_column(knob_label(key, every), no_wrap=True)
    if not as_columns:
        table.add_column("changes" if reference is not None else "configuration", overflow="fold")
    for row, t in zip(rows, trials):
        cells = []
        for key in shown:
            value = escape(fmt(_effective(t.params, key, idle) if key in t.params else ""))
            same = reference is not None and \
                _effective(t.params, key, idle) == _effective(reference.params, key, idle)
            cells.append(f"[dim]{value}[/dim]" if same or value == NO_EFFECT else value)
        if not as_columns:
            cells.append(escape(_changes(t.params, reference, knobs, every, idle)) or "[dim]none[/dim]")
        table.add_row(*row, *cells)
    notes = ["* the answer" + (", in the last row: not on the front (a front row's figures beat its own here; the "
                               "answer panel says why it is the answer)"
                               if off_front else "")] if any(is_answer(t) for t in trials) else []
    if any(r.runs > 1 for r in front):
        notes.append("a configuration measured more than once (the confirmation's rounds, nightly's repeats): its "
                     "first trial, figures the median of its runs")
    if with_speedup and answer:
        notes.append("vs base: the row's median over your configuration's, at your seed" +
                     ("; the answer panel's speedups pair the confirmation's interleaved rounds"
                      if answer.get("rounds") or answer.get("confirm_rounds") else ""))
    if reference is not None:
        notes.append((f"knobs shown: those that differ from {called}" if as_columns else
                      f"changes: the knobs each row sets otherwise than {called}") +
                     (f" ({escape(_pairs(reference.params, every))})" if knobs else ", none do"))
    if any(_effective(t.params, k, idle) == NO_EFFECT for t in trials for k in shown if k in t.params):
        notes.append(f"{NO_EFFECT}: without effect beside the row's other values (persistent workers without workers)")
    notes.append("every metric and knob: MLflow and the report")
    heading = f"[bold]{title} of study {escape(repr(study.study_name))}[/bold] ({len(trials) - len(off_front)} trials)"
    return Group(heading, table, *(f"[dim]{note}[/dim]" for note in notes))


def _changes(params: Mapping[str, Any], reference: FrozenTrial | None, knobs: Sequence[str], every: Sequence[str],
             idle: Idle) -> str:
    """A row's knobs that differ from `reference` (all of `knobs` without one), in `knobs`' order. No change: a
    value the row's other values leave without effect (persistent workers without workers), nor the reference's
    own value where only the reference left it without effect (no persistent workers beside workers, against
    none beside no workers)."""
    return " ".join(f"{knob_label(k, every)}={fmt(params[k])}" for k in knobs if k in params and (
        reference is None or (_effective(params, k, idle) != _effective(reference.params, k, idle)
                              and _effective(params, k, idle) != NO_EFFECT
                              and params[k] != reference.params.get(k))))


def _pairs(params: Mapping[str, Any], every: Sequence[str]) -> str:
    return " ".join(f"{knob_label(k, every)}={fmt(v)}" for k, v in params.items())


def _width(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """Columns a rich Table with the default box takes: a border, then per column its text, padding and border."""
    return 1 + sum(3 + max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers))


def console() -> Console:
    """A terminal's own width; a log file or pipe gets $COLUMNS when set, else PIPE_WIDTH."""
    plain = Console()
    if plain.is_terminal:
        return plain
    columns = os.environ.get("COLUMNS", "")
    return Console(width=int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH)


def say(line: str) -> None:
    """One of the sweep's notes before its trials, wrapped between words at the width the trial lines and tables
    use (a terminal's own, else $COLUMNS or PIPE_WIDTH): they ran to 250 columns. A word longer than that (a
    path, a URL) is kept whole, so it can still be copied."""
    width = console().width
    wrapped = ["\n".join(textwrap.wrap(part, width, break_long_words=False, break_on_hyphens=False))
               for part in line.split("\n")]
    print("\n".join(wrapped), flush=True)


def print_front(study: optuna.Study, metric_names: Sequence[str], idle: Idle = no_idle) -> None:
    out = console()
    out.print(front_table(study, metric_names, out.width, idle))


def print_single(job_cfg: Mapping[str, Any], result: Mapping[str, Any]) -> None:
    """`python -m search run`: one trial's outcome and figures."""
    table = Table(title=escape(f"trial outcome: {result.get('outcome')}  {result.get('reason', '')}"))
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in sorted(result.get("metrics", {}).items()):
        table.add_row(key, fmt(value))
    info = dict(result.get("info", {}))
    warnings = [info.pop(k) for k in WARNINGS if k in info]
    for key, value in sorted(info.items()):
        table.add_row(key, escape(str(value)))  # the user's text (paths, reasons): '[...]' is no markup
    console().print(table)
    for warning in warnings:
        print(warning, file=sys.stderr, flush=True)
