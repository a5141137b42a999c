"""The study's stored vocabulary, the bottom layer of search/: the keys the sweep stores on Optuna studies and
trials, the trial roles, the outcome names, the Answer, and typed reads of a trial. Everyone reads it; it imports
nothing of search/ but itself (docs/design.md). Public names are re-exported here, as Optuna re-exports from its
modules: `from search.record import ROLE_ATTR, Answer, outcome`.
"""
from __future__ import annotations

from search.record.keys import (ACCURACY_FROM_ATTR, ANSWER_ATTR, APP_ATTR, BASELINE, COMBINED_ATTR, CONFIRM,
                                CONFIRMATION_ROLES, CONFIRMER_ATTR, CONSTRAINTS_ATTR, DEFERRED_ATTR, ENDED_ATTR,
                                ENQUEUED_AS, EXTRA_OVERRIDES_ATTR, FIXED_ATTR, HALFWAY_ATTR, HEARTBEAT_ATTR,
                                LAUNCHED_ATTR, METRICS_ATTR, METRIC_NAMES_ATTR, MLFLOW_PARENT_RUN_ID_ATTR,
                                MLFLOW_RUN_ID_ATTR, MOVED_FROM_ATTR, MOVES, NIGHTLY_INCUMBENT, NIGHTLY_ROLE_ATTR,
                                NIGHTLY_STANDING, NIGHTLY_TESTED, NIGHTLY_TOP_UP, NIGHTLY_WARM_START, OUTCOME_ATTR,
                                OVERRIDES_ATTR, PROPOSALS_ENQUEUED, PUT_BACK_OF_ATTR, REASON_ATTR, RECIPE_ATTR,
                                REPAIRED_ATTR, REPEAT_ATTR, REPLACES_ATTR, RETRIES_ATTR, RETRY_OF_ATTR, RETUNED_ATTR,
                                ROLE_ATTR, ROUND_ATTR, SEED_ATTR, SEED_CHECK, SET_ASIDE_ATTR, SLOTS_ATTR, START_ATTR,
                                STOPPED_BY_ATTR, STUDY_ID_ATTR, TOLERANCE_ATTR, WORKER_ATTR, WORKER_STATE_PREFIX)
from search.record.outcomes import (CRASHED, DIVERGED, INFEASIBLE, INFEASIBLE_OUTCOMES, OK, OOM, OUTCOMES, RUNNABLE,
                                    SKIPPED, STOPPED_EARLY, TIMEOUT)
from search.record.trials import (accuracy, ended_unix_s, is_feasible, launched_unix_s, metrics, move_of,
                                  named_constraints, outcome, reason, role, seed, throughput)
from search.record.answer import (ACCURACY, Answer, Contender, MEMORY_METRICS, Ratio, THROUGHPUT, t975)

__all__ = [
    "ACCURACY", "ACCURACY_FROM_ATTR", "ANSWER_ATTR", "APP_ATTR", "Answer", "BASELINE", "COMBINED_ATTR", "CONFIRM",
    "CONFIRMATION_ROLES", "CONFIRMER_ATTR", "CONSTRAINTS_ATTR", "CRASHED", "Contender", "DEFERRED_ATTR", "DIVERGED",
    "ENDED_ATTR", "ENQUEUED_AS", "EXTRA_OVERRIDES_ATTR", "FIXED_ATTR", "HALFWAY_ATTR", "HEARTBEAT_ATTR", "INFEASIBLE",
    "INFEASIBLE_OUTCOMES", "LAUNCHED_ATTR", "MEMORY_METRICS", "METRICS_ATTR", "METRIC_NAMES_ATTR",
    "MLFLOW_PARENT_RUN_ID_ATTR", "MLFLOW_RUN_ID_ATTR", "MOVED_FROM_ATTR", "MOVES", "NIGHTLY_INCUMBENT",
    "NIGHTLY_ROLE_ATTR", "NIGHTLY_STANDING", "NIGHTLY_TESTED", "NIGHTLY_TOP_UP", "NIGHTLY_WARM_START", "OK", "OOM",
    "OUTCOMES", "OUTCOME_ATTR", "OVERRIDES_ATTR", "PROPOSALS_ENQUEUED", "PUT_BACK_OF_ATTR", "REASON_ATTR",
    "RECIPE_ATTR", "REPAIRED_ATTR", "REPEAT_ATTR", "REPLACES_ATTR", "RETRIES_ATTR", "RETRY_OF_ATTR", "RETUNED_ATTR",
    "ROLE_ATTR", "ROUND_ATTR", "RUNNABLE", "Ratio", "SEED_ATTR", "SEED_CHECK", "SET_ASIDE_ATTR", "SKIPPED",
    "SLOTS_ATTR", "START_ATTR", "STOPPED_BY_ATTR", "STOPPED_EARLY", "STUDY_ID_ATTR", "THROUGHPUT", "TIMEOUT",
    "TOLERANCE_ATTR", "WORKER_ATTR", "WORKER_STATE_PREFIX", "accuracy", "ended_unix_s", "is_feasible",
    "launched_unix_s", "metrics", "move_of", "named_constraints", "outcome", "reason", "role", "seed", "t975",
    "throughput",
]
