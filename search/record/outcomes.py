"""How a trial ended: the value of its `outcome` attribute (keys.OUTCOME_ATTR), and the sets the sweep reads.

What each outcome tells Optuna is search/sweep/outcome.py's: `ok` is COMPLETE with its values; `oom` and
`infeasible` COMPLETE with placeholder values and the RUNNABLE constraint violated; `stopped_early` COMPLETE with
its probe's throughput (PRUNED outside the staged rule); `diverged`, `crashed`, `timeout` FAIL; `skipped` a
trial closed without running (a repeat, or one set aside while the answer was confirmed).
"""
from __future__ import annotations

OK = "ok"
OOM = "oom"
INFEASIBLE = "infeasible"
STOPPED_EARLY = "stopped_early"
DIVERGED = "diverged"
CRASHED = "crashed"
TIMEOUT = "timeout"
SKIPPED = "skipped"
OUTCOMES = (OK, OOM, INFEASIBLE, STOPPED_EARLY, DIVERGED, CRASHED, TIMEOUT, SKIPPED)

INFEASIBLE_OUTCOMES = (OOM, INFEASIBLE)  # told as infeasible points, so samplers learn the region
# The first constraint of every trial: 0 for one that ran and reported the metrics it is scored on, 1 otherwise.
RUNNABLE = "runnable"
