"""The morning report of a nightly sweep, as Markdown and HTML: tonight's
best, its change versus last night and versus the best ever, the regression
verdict and what else differed between its compared runs (search/nightly/
conditions.py), and software and hardware changes since last night."""
from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

from search.reports.choose import Candidate, key
from search.nightly import conditions
from search.nightly.conditions import Difference
from search.nightly.regression import Verdict


@dataclass
class Summary:
    study_name: str
    metric: str
    tonight: Candidate | None
    metric_names: list[str]
    incumbent: Candidate | None = None
    incumbent_night: str | None = None
    incumbent_tonight: Candidate | None = None
    verdict: Verdict | None = None
    last_night: str | None = None  # the latest earlier night on this hardware with a result
    previous_night: str | None = None  # the night before tonight, whatever it found (the changes since)
    last_best: Candidate | None = None
    best_ever: Candidate | None = None
    best_ever_night: str | None = None
    changes: list[str] = field(default_factory=list)
    differences: list[Difference] = field(default_factory=list)  # the compared runs' FLOPs, CPU/GPU share
    incumbent_runs_this_run: int | None = None  # of tonight's runs of the incumbent, those this run made
    standing: Candidate | None = None  # a regression that stands: its configuration's runs on the last fast night
    standing_night: str | None = None
    standing_since: str | None = None
    standing_tonight: Candidate | None = None
    standing_verdict: Verdict | None = None
    accepted: dict | None = None  # the standing regression tonight accepted (hydra.sweeper.nightly.accept_slowdown)

    @property
    def regressed(self) -> bool:
        return any(v is not None and v.regressed for v in (self.verdict, self.standing_verdict))


def _fmt(v: float) -> str:
    return "n/a" if v is None or not math.isfinite(v) else f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def _config(c: Candidate) -> str:
    return _params(c.params)


def _params(params: dict) -> str:
    return ", ".join(f"`{k}={v}`" for k, v in sorted(params.items()))


def _vs(s: Summary, other: Candidate | None, night: str | None, what: str) -> str:
    if s.tonight is None or other is None:
        return f"- versus {what}: no earlier result on this hardware"
    now, before = s.tonight.metrics[s.metric], other.metrics[s.metric]
    line = f"- versus {what} ({night}): {_fmt(before)} -> {_fmt(now)} ({now / before - 1:+.1%})"
    if key(other.params) != key(s.tonight.params):  # a change of answer, not of speed: the regression test says that
        changed = ", ".join(f"`{k}={v}`" for k, v in sorted(other.params.items()) if s.tonight.params.get(k) != v)
        line += f"; another configuration then ({changed or 'other knobs'})"
    return line


def _moved_note(s: Summary) -> str:
    """Beside "None": what differed anyway between the compared runs (a model change, another machine load)."""
    moved = [d.metric for d in s.differences if d.moved]
    return f" The compared runs still differed in {', '.join(moved)}: see Regressions." if moved else ""


def markdown(s: Summary, status: str) -> str:
    lines = [f"# Nightly {s.study_name}: {status.upper()}", ""]
    lines += ["## Tonight's best", ""]
    if s.tonight is None:
        lines += ["No result tonight: no trial ran `ok`, or your configuration never did (the answer is measured "
                  "against it): see the sweep's log and the trials' outcomes in MLflow.", ""]
    else:
        shown = [s.metric, *[o for o in s.metric_names if o != s.metric]]
        lines += [f"- configuration: {_config(s.tonight)}",
                  *[f"- {m}: {_fmt(s.tonight.metrics.get(m, math.nan))} (median of {len(s.tonight.trials)})"
                    for m in shown],
                  _vs(s, s.last_best, s.last_night, "last night's best"),
                  _vs(s, s.best_ever, s.best_ever_night, "the best ever"), ""]
    lines += ["## Regressions", ""]
    lines += _standing_lines(s)
    if s.verdict is None:
        lines += ["None tested: no earlier night on this hardware.", ""]
    else:
        before = ", ".join(_fmt(v) for v in s.incumbent.values(s.metric))
        now = ", ".join(_fmt(v) for v in s.incumbent_tonight.values(s.metric)) if s.incumbent_tonight else "none"
        head, did = ("**REGRESSION**", "measured again") if s.verdict.regressed else \
            ("No regression", "measured again") if s.verdict.tested else ("**NOT TESTED**", "not measured again enough")
        lines += [f"{head}: last night's best ({s.incumbent_night}: {_config(s.incumbent)}) {did}.", "",
                  f"- {s.metric} before: {before}", f"- {s.metric} tonight: {now}", f"- {s.verdict.why}",
                  *([f"- none of tonight's runs of it ran in this run: the night was run again and its study "
                     f"resumed, so this is the verdict of its earlier run's measurements; to measure again, run a "
                     f"new night (hydra.sweeper.study_name=<new name>)"]
                    if s.incumbent_tonight and s.incumbent_runs_this_run == 0 else []),
                  *[f"- {line}" for line in conditions.lines(s.differences)], ""]
    lines += ["## Software and hardware changes since last night", ""]
    if s.previous_night is None:
        lines += ["First night of this series.", ""]
    else:
        lines += [f"- {c}" for c in s.changes] or [f"None (same as {s.previous_night}).{_moved_note(s)}"]
        lines += [""]
    return "\n".join(lines)


def _standing_lines(s: Summary) -> list[str]:
    """A regression found on an earlier night, tested again tonight against the last night it was fast on."""
    if s.accepted:
        return [f"Accepted: the regression since {s.accepted['since']} ({_params(s.accepted['params'])}, slower "
                f"than on {s.accepted['night']}) is no longer tested (hydra.sweeper.nightly.accept_slowdown=true).",
                ""]
    if s.standing_verdict is None:
        return []
    v, config = s.standing_verdict, _config(s.standing)
    if v.regressed:
        head = (f"**STILL A REGRESSION** since {s.standing_since}: {config} is still slower than on "
                f"{s.standing_night}, the last night it was fast on")
    elif v.tested:
        head = f"Recovered: {config}, slower since {s.standing_since}, is back to its speed of {s.standing_night}"
    else:
        head = (f"**NOT TESTED**: the regression since {s.standing_since} ({config}, against {s.standing_night}) "
                f"was not measured again enough; it stands until a night measures it")
    now = ", ".join(_fmt(x) for x in s.standing_tonight.values(s.metric)) if s.standing_tonight else "none"
    fix = ([f"- to accept the new speed (an intended change), run the next night with "
            f"hydra.sweeper.nightly.accept_slowdown=true"] if v.regressed or not v.tested else [])
    return [f"{head}.", "", f"- {s.metric} on {s.standing_night}: "
            f"{', '.join(_fmt(x) for x in s.standing.values(s.metric))}", f"- {s.metric} tonight: {now}",
            f"- {v.why}", *fix, ""]


def write(s: Summary, status: str, out_dir: Path, plot_files: list[Path]) -> list[Path]:
    """nightly.md and nightly.html in out_dir, the plots linked from both."""
    out_dir.mkdir(parents=True, exist_ok=True)
    text = markdown(s, status)
    pngs = [p for p in plot_files if p.suffix == ".png"]
    pages = [p for p in plot_files if p.suffix == ".html"]
    if plot_files:
        text += "\n## Plots\n\n" + "".join(f"![{p.stem}]({p.name})\n\n" for p in pngs)
        text += "".join(f"Interactive: [{p.name}]({p.name})\n" for p in pages)
    md, page = out_dir / "nightly.md", out_dir / "nightly.html"
    md.write_text(text)
    body = MarkdownIt("commonmark").enable("table").render(text)
    page.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(s.study_name)}</title>"
                    f"<style>body{{font-family:sans-serif;max-width:60em;margin:auto}}img{{max-width:100%}}"
                    f"</style></head><body>{body}</body></html>")
    return [md, page]
