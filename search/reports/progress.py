"""The live display of a sweep: trials done of total, best so far, the
trial running now, elapsed time and ETA (rich)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from search.reports.tables import console as report_console


def _short(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k.split('.')[-1]}={v}" for k, v in params.items())


class SweepProgress:
    """Context manager around rich.Progress; one printed line per finished trial."""

    def __init__(self, total: int, metric_names: Sequence[str], console: Console | None = None) -> None:
        self.metric_names = list(metric_names)
        self.console = console or report_console()
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[best]}"),
            console=self.console,
        )
        self._task = self._progress.add_task("trials", total=total, best="")
        self._best: dict[str, float] = {}

    def __enter__(self) -> "SweepProgress":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(*exc)

    def grow(self, total: int) -> None:
        self._progress.update(self._task, total=total)

    def started(self, numbers: Sequence[int], params: Mapping[str, Any]) -> None:
        label = ",".join(map(str, numbers))
        self._progress.update(self._task, description=f"trial {label}: {_short(params)}")

    def finished(self, number: int, outcome: str, metrics: Mapping[str, float], params: Mapping[str, Any],
                 directions: Sequence[str], reason: str = "", feasible: bool = True) -> None:
        if outcome == "ok" and feasible:
            for name, direction in zip(self.metric_names, directions):
                if name in metrics:
                    better = max if direction == "maximize" else min
                    self._best[name] = better(self._best.get(name, metrics[name]), metrics[name])
        shown = " ".join(f"{k}={metrics[k]:.4g}" for k in self.metric_names if k in metrics)
        colour = {"ok": "green", "stopped_early": "yellow"}.get(outcome, "red")
        tail = f" [dim]{reason}[/dim]" if reason and outcome != "ok" else ("" if feasible else " [yellow]infeasible: violates a constraint[/yellow]")
        self._progress.console.print(f"trial {number} [{colour}]{outcome}[/{colour}] {shown}  [dim]{_short(params)}[/dim]{tail}")
        best = "  ".join(f"best {k}={v:.4g}" for k, v in self._best.items())
        self._progress.update(self._task, advance=1, best=best)
