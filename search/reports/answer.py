"""The answer as the user sees it: one panel at the end of the terminal, metrics and tags on MLflow's sweep run."""
from __future__ import annotations

import math
from typing import Any, Mapping

import optuna
from rich.panel import Panel
from rich.text import Text

from search.record import Answer
from search.reports.tables import console
from search.sweep.answer import Idle, no_idle, panel_lines, seed_differences
from search.sweep.confirm import throughput_of
from search.sweep.reproduce import paste_line
from search.sweep.space import to_override
from search.tracking import mlflow_client


def print_answer(answer: Answer, baseline_params: Mapping[str, Any], idle: Idle = no_idle) -> None:
    title = "the answer: your configuration" if answer.is_baseline else "the answer"
    # Text, not markup: the lines hold the user's overrides and values ('hydra.searchpath=[file://...]')
    console().print(Panel(Text("\n".join(panel_lines(answer, baseline_params, idle))), title=title,
                          title_align="left", expand=False))


def answer_metrics(answer: Answer | None) -> dict[str, float]:
    """The sweep run's metrics: the speedup over the baseline with its 95% interval, the rounds the confirmation
    ran, both accuracies, and the second-seed check's (seed_check_*: the means over both seeds, the second seed's
    runs, and the answer's accuracy less yours at each seed)."""
    if answer is None:
        return {}
    out = {"speedup_vs_baseline": answer.speedup, "confirm_rounds": float(answer.rounds_run()),
           "confirm_wall_s": answer.confirm_wall_s, "search_wall_s": answer.search_wall_s}
    if math.isfinite(answer.ci_low) and math.isfinite(answer.ci_high) and answer.rounds >= 2:
        out.update(speedup_vs_baseline_ci_low=answer.ci_low, speedup_vs_baseline_ci_high=answer.ci_high)
    if answer.fastest_contender:  # your configuration: what the rounds measured of the fastest that did not beat it
        fastest = answer.fastest_contender
        out.update(fastest_contender_speedup=fastest["speedup"], fastest_contender_speedup_ci_low=fastest["ci_low"],
                   fastest_contender_speedup_ci_high=fastest["ci_high"])
    if answer.val_accuracy is not None:
        out["answer_val_accuracy"] = answer.val_accuracy
    if answer.baseline_val_accuracy is not None:
        out["baseline_val_accuracy"] = answer.baseline_val_accuracy
        out["accuracy_floor"] = answer.baseline_val_accuracy - answer.tolerance  # what the others had to reach
    check = answer.seed_check or {}
    if "mean_val_accuracy" in check:  # the second-seed check the answer rests on: both seeds' means, each side
        out.update(seed_check_answer_val_accuracy_mean=check["mean_val_accuracy"],
                   seed_check_baseline_val_accuracy_mean=check["baseline_mean_val_accuracy"],
                   # the answer's less yours at each seed: how far they differ is the check's own noise
                   **dict(zip(("seed_check_difference_first_seed", "seed_check_difference_second_seed"),
                              seed_differences(check))))
    if check:
        out.update(seed_check_answer_val_accuracy=check["val_accuracy"],
                   seed_check_baseline_val_accuracy=check["baseline_val_accuracy"])
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}


def answer_throughputs(study: optuna.Study, answer: Answer | None) -> dict[str, float]:
    """The sweep run's absolute figures beside the ratio: the answer's and your configuration's throughput, each
    the median of its runs at your seed that ended ok (the confirmation's rounds among them), the front table's
    figures; your configuration's is the `vs base` divisor (search/sweep/confirm.py throughput_of)."""
    if answer is None:
        return {}
    out = {"answer_throughput_samples_per_s": throughput_of(study, answer.params)}
    if answer.baseline_trials:
        base = study.get_trials(deepcopy=False)[answer.baseline_trials[0]].params
        out["baseline_throughput_samples_per_s"] = throughput_of(study, base)
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}


def answer_tags(answer: Answer) -> dict[str, str]:
    tags = {"search.answer.overrides": paste_line(answer.overrides),
            "search.answer.is_baseline": str(answer.is_baseline).lower(),
            "search.answer.trials": ",".join(map(str, answer.trials)),
            "search.answer.baseline_trials": ",".join(map(str, answer.baseline_trials))}
    if answer.fastest_contender:
        tags["search.answer.fastest_contender"] = paste_line(answer.fastest_contender["overrides"])
    if answer.seed_check:
        tags["search.answer.seed_check"] = "passed" if answer.seed_check["passed"] else "failed"
        if answer.seed_check.get("your_maths"):  # passed by construction: your runs stand for it at both seeds
            tags["search.answer.seed_check_from"] = "baseline"
    if answer.note:  # the panel's words on how it was reached (a check failed, what was confirmed next, ...)
        tags["search.answer.note"] = answer.note
    if answer.baseline_breaks:  # the answer meets your constraints, your configuration does not
        tags["search.answer.baseline_breaks"] = answer.baseline_breaks
    if answer.not_confirmed:  # within noise of the search's fastest, left out of the confirmation by its budget
        tags["search.answer.not_confirmed"] = "; ".join(paste_line(_overrides(c)) for c in answer.not_confirmed)
    return tags


def _overrides(contender: Mapping[str, Any]) -> list[str]:
    """A contender's overrides as `search.answer.overrides` has the answer's (the sweep's fixed ones with its
    knobs); from its knobs alone for an answer stored before they were kept."""
    return contender.get("overrides") or [to_override(k, v) for k, v in contender["params"].items()]


def tag_sweep_run(run_id: str | None, answer: Answer) -> None:
    """Best effort: MLflow down leaves the answer on the study (search.answer) and in the terminal."""
    mlflow_client.log_report(run_id, [], answer_tags(answer))
