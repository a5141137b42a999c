"""Short names and number formats for a terminal of 80-100 columns.

The full names (`throughput_samples_per_s`, `loader.persistent_workers`)
stay in MLflow, the study and the report; the terminal shows the short ones.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# info key of the line that names the knobs a workload does not apply (objectives/result.py names it too; the
# sweep does not import objectives at start-up): the sweep says it once, `search run` after its table
NOT_APPLIED_WARNING = "knobs_not_applied_warning"
THROUGHPUT_WARNING = "throughput_warning"  # objectives/result.py: a budget too small to warm up before timing
WARNINGS = (NOT_APPLIED_WARNING, THROUGHPUT_WARNING)  # info lines a sweep says once each, `search run` after its table

_METRIC_LABELS = {
    "throughput_samples_per_s": "samples/s",
    "throughput_tokens_per_s": "tokens/s",
    "val_accuracy": "val acc",
    "val_loss": "val loss",
    "time_to_accuracy_s": "s to acc",
    "peak_pss_tree_bytes": "peak mem",
    "trial_wall_s": "wall s",
    "energy_j_per_sample": "J/sample",
}


def metric_label(name: str) -> str:
    return _METRIC_LABELS.get(name, name)


def knob_label(key: str, all_keys: Iterable[str] = ()) -> str:
    """A dotted knob's last part (`persistent_workers`), or the whole key when another knob ends the same way."""
    last = key.rsplit(".", 1)[-1]
    clash = [k for k in all_keys if k != key and k.rsplit(".", 1)[-1] == last]
    return key if clash else last


def fmt(value: Any) -> str:
    """4 significant figures; thousands separated and no decimals from 10,000 up."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:,.4g}"
