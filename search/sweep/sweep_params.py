"""What a sweep was, on its MLflow parent run: its settings as run, its space, its objective."""
from __future__ import annotations

from typing import Any

from search.sweep.reproduce import configuration_overrides, paste_line


def run_tags(objective: str, fixed_overrides: list[str]) -> dict[str, str]:
    """Its objective and its fixed overrides (those every trial shares; a trial's own run has them with its knobs
    in search.overrides)."""
    return {"search.objective": objective,
            "search.fixed_overrides": paste_line(configuration_overrides(fixed_overrides))}


def run_params(settings: Any, plan: Any, metric_names: list[str], designed: bool,
               patience_trials: int | None) -> dict[str, Any]:
    """The sweep's MLflow parent run params; `designed` and `patience_trials`: the start design and the patience
    as the search runs them (search/sweep/build.py), not as written."""
    s = settings
    return {"n_trials": s.n_trials, "n_jobs": s.n_jobs, "directions": ",".join(plan.directions),
            "slots": len(plan.slots) if plan.slots else "none (launcher batches)",
            "metrics": ",".join(metric_names),
            "sampler": type(plan.sampler).__name__, "sampler_seed": "none" if s.seed is None else s.seed,
            "constraints": "; ".join(map(str, plan.constraints)) or "none",
            "early_stopping": plan.early_stopping, "pruner": type(plan.pruner).__name__,
            "early_stopping_margin": s.early_stopping_margin,
            "early_stopping_startup_trials": s.early_stopping_startup_trials,
            "accuracy_tolerance": s.accuracy_tolerance, "baseline_repeats": s.baseline_repeats,
            "confirm_budget": s.confirm_budget, "confirm_candidates": s.confirm_candidates,
            "confirm_undecided_rounds": s.confirm_undecided_rounds, "staging": s.staging,
            "report": s.report,
            "search_for": s.search_for,
            "start_design": "one_knob_at_a_time" if designed else "sampler",
            "start_combination": s.start_combination,
            "patience_trials": "none" if patience_trials is None else patience_trials,
            **{f"space.{k}": repr(d) for k, d in plan.space.distributions.items()}}
