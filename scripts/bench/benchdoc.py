"""What every benchmark writes next to its figures: the machine, its load,
and its own section of docs/BENCHMARKS.md."""
from __future__ import annotations

import os
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"


def machine_line() -> str:
    from search.measure import fingerprint

    fp = fingerprint.collect()
    gpu = fp["gpu_name"] if fp["gpu_name"] != "none" else "no GPU"
    return (f"{fp['cpu_model']}, {fp['cpu_count']} logical cores, {gpu}; torch {fp['torch_version']}, "
            f"Python {fp['python_version']}")


def load_averages() -> str:
    """`uptime`'s 1, 5 and 15 minute load averages: above ~1 on this 2-core machine, other jobs shared it."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def write_section(heading: str, text: str, keep_earlier: bool = True) -> None:
    """Write the section `heading` (up to the next `## ` heading), appended when the doc has none.

    With ``keep_earlier``, what the section held before stays below the new text, under
    `### The run before` (its own `###` headings one level down), so a re-run never loses the
    earlier figures and the notes written beside them; without it (a script that renders every
    subsection itself), the section is replaced."""
    doc = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n(.*?)(?=^## |\Z)", re.S | re.M)
    text = text.rstrip("\n") + "\n\n"  # a blank line before the next section's heading
    found = pattern.search(doc)
    earlier = found.group(1).strip("\n") if found else ""
    if keep_earlier and earlier:
        text += "### The run before\n\n" + re.sub(r"^###(?= )", "####", earlier, flags=re.M) + "\n\n"
    doc = pattern.sub(lambda _: text, doc) if found else doc.rstrip("\n") + f"\n\n{heading}\n\n" + text
    DOC.write_text(doc.rstrip("\n") + "\n")


def update_summary(row: str, figure: str, met: bool | None) -> None:
    """Refresh one row of the summary table at the top of docs/BENCHMARKS.md
    (columns: what | goal | now | met | details), found by its first cell."""
    status = {True: "yes", False: "**no**", None: "-"}[met]
    lines = DOC.read_text().splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == row and len(cells) == 5:
            lines[i] = f"| {row} | {cells[1]} | {figure} | {status} | {cells[4]} |"
            DOC.write_text("\n".join(lines) + "\n")
            return
    raise KeyError(f"docs/BENCHMARKS.md's summary table must have a row {row!r}; add it by hand first")
