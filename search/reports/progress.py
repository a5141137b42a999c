"""The live display of a sweep (rich), laid out for 80-100 columns.

Two parts, each sized to the console's width when it is drawn:

- the status line: trials done of total, elapsed time, ETA and the best so
  far. Searching for the answer that is one trial, the fastest within the
  accuracy tolerance (`SweepProgress.stand`): `best trial 7: 1,234
  samples/s  0.973 val acc`; otherwise the best value of each metric, each
  perhaps from another trial (`best of each:` when there are several).
  When the width runs short the bar goes first, then the elapsed time; the
  count, the ETA and the best values stay (a long metric name is
  shortened, search/reports/labels.py).
- one line per trial running now, its knob values cut at the width.

Each finished trial also prints one line above the display (it stays in
the scroll-back and in a piped log): outcome, what it was run for when it
was not an ordinary proposal (the baseline, a confirmation round, a run at
another seed, a throughput-only trial and whose accuracy it carries),
metrics, knob values.
The ETA is the wall time per finished trial so far times the trials left,
which counts trials running side by side on several devices.
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.markup import escape
from rich.progress import Progress
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from search.reports.labels import fmt, knob_label, metric_label
from search.reports.tables import console as report_console

_MIN_BAR = 8
_MAX_BAR = 30
_RUNNING_SHOWN = 4


def _short(params: Mapping[str, Any]) -> str:
    return " ".join(f"{knob_label(k, params)}={fmt(v)}" for k, v in params.items())


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def status_line(done: int, total: int, elapsed_s: float, best: Mapping[str, float], width: int,
                label: str = "best") -> RenderableType:
    """`trials 3/20 ━━━━ 0:42 ETA 3:58  best 1,234 samples/s  0.973 val acc` in `width` columns; `label`
    says what `best` is (`best trial 7`: one trial's figures; `best of each`: each metric's own best)."""
    count = f"trials {done}/{total}"
    eta = f"ETA {_clock(elapsed_s / done * max(total - done, 0)) if done else '--:--'}"
    elapsed = _clock(elapsed_s)
    best_text = (f"{label}: " + "  ".join(f"{fmt(v)} {metric_label(k)}" for k, v in best.items())) if best else ""
    needed = len(count) + 1 + len(eta) + (2 + len(best_text) if best_text else 0)
    show_elapsed = needed + 1 + len(elapsed) <= width
    bar = width - needed - (1 + len(elapsed) if show_elapsed else 0) - 1
    row: list[RenderableType] = [Text(count, style="bold")]
    if bar >= _MIN_BAR:
        row.append(ProgressBar(total=max(total, 1), completed=done, width=min(bar, _MAX_BAR)))
    if show_elapsed:
        row.append(Text(elapsed, style="dim"))
    row.append(Text(eta))
    if best_text:
        row.append(Text(best_text, style="green", no_wrap=True, overflow="ellipsis"))
    grid = Table.grid(padding=(0, 1))
    for cell in row:
        grid.add_column(no_wrap=True, overflow="ellipsis")
    grid.add_row(*row)
    return grid


def running_lines(running: Mapping[int, Mapping[str, Any]]) -> list[Text]:
    """One line per trial running now (the first few), cut with an ellipsis at the width."""
    lines = [Text(f"  running trial {n}: {_short(p)}", style="dim", no_wrap=True, overflow="ellipsis")
             for n, p in list(running.items())[:_RUNNING_SHOWN]]
    if len(running) > _RUNNING_SHOWN:
        lines.append(Text(f"  and {len(running) - _RUNNING_SHOWN} more running", style="dim"))
    return lines


def finished_line(number: int, outcome: str, metrics: Mapping[str, float], metric_names: Iterable[str],
                  params: Mapping[str, Any], reason: str = "", feasible: bool = True, kind: str = "",
                  violated: str = "") -> str:
    """The line a finished trial leaves in the log (rich markup); `kind`: what the trial was run for, when it
    was not an ordinary proposal (`baseline, seed 1`, `timed only, val acc of trial 6`); `violated`: the
    constraints an infeasible trial broke, with its figures."""
    shown = "  ".join(f"{fmt(metrics[k])} {metric_label(k)}" for k in metric_names if k in metrics)
    colour = {"ok": "green", "stopped_early": "yellow"}.get(outcome, "red")
    if reason and outcome != "ok":
        tail = f"  [dim]{escape(reason)}[/dim]"
    else:
        tail = "" if feasible else f"  [yellow]infeasible: violates {escape(violated or 'a constraint')}[/yellow]"
    knobs = f"  [dim]{escape(_short(params))}[/dim]" if params else ""
    what = f" [dim]({escape(kind)})[/dim]" if kind else ""
    return f"trial {number} [{colour}]{outcome}[/{colour}]{what}{'  ' + shown if shown else ''}{knobs}{tail}"


class _Display(Progress):
    """rich.Progress (its live refresh, and prints above the display) drawing our own lines."""

    def __init__(self, sweep: SweepProgress, console: Console) -> None:
        self._sweep = sweep  # before Progress starts drawing
        super().__init__(console=console, refresh_per_second=2)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self._sweep.renderable(self._sweep.console.width)  # Live draws once before self.live exists


class SweepProgress:
    """Context manager around the live display; one printed line per finished trial."""

    def __init__(self, total: int, metric_names: Sequence[str], console: Console | None = None) -> None:
        self.metric_names = list(metric_names)
        self.console = console or report_console()
        self.total, self.done = total, 0
        self.running: dict[int, Mapping[str, Any]] = {}
        self._best: dict[str, float] = {}
        self._standing: tuple[int, dict[str, float]] | None = None  # searching for the answer: (trial, metrics)
        self._started = time.monotonic()
        self._progress = _Display(self, self.console)

    def __enter__(self) -> SweepProgress:  # noqa: PYI034
        self._started = time.monotonic()
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.running = {}
        self._progress.__exit__(*exc)

    def renderable(self, width: int) -> RenderableType:
        if self._standing is not None:
            number, best = self._standing
            label = f"best trial {number}"
        else:
            best, label = self._best, "best" if len(self.metric_names) < 2 else "best of each"
        status = status_line(self.done, self.total, time.monotonic() - self._started, best, width, label)
        return Group(status, *running_lines(self.running))

    def stand(self, number: int, metrics: Mapping[str, float]) -> None:
        """Searching for the answer: the best so far is one trial, the fastest whose val_accuracy is within the
        tolerance of your configuration's; the status line shows its figures together (each metric's best
        apart would pair one trial's speed with another's accuracy)."""
        self._standing = number, {k: metrics[k] for k in self.metric_names if k in metrics}

    def grow(self, total: int) -> None:
        self.total = total
        self._progress.refresh()

    def started(self, numbers: Sequence[int], params: Mapping[str, Any]) -> None:
        # Replaced, never changed in place: the display's refresh thread iterates over it.
        self.running = {**self.running, **{number: dict(params) for number in numbers}}
        self._progress.refresh()

    def finished(self, number: int, outcome: str, metrics: Mapping[str, float], params: Mapping[str, Any],
                 directions: Sequence[str], reason: str = "", feasible: bool = True, kind: str = "",
                 counts_as_best: bool = True, violated: str = "") -> None:
        """`counts_as_best`: False for a run at another seed, whose accuracy is not the study's."""
        if outcome == "ok" and feasible and counts_as_best:
            for name, direction in zip(self.metric_names, directions):
                if name in metrics:
                    better = max if direction == "maximize" else min
                    self._best[name] = better(self._best.get(name, metrics[name]), metrics[name])
        self.running = {n: p for n, p in self.running.items() if n != number}
        self.done += 1
        self._progress.console.print(finished_line(number, outcome, metrics, self.metric_names, params, reason,
                                                   feasible, kind, violated))
        self._progress.refresh()
