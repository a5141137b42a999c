"""Every key the sweep stores on an Optuna study or trial: user attributes, unless a comment says system attribute.

The strings are a stored format: studies written before are read with them, and each trial attribute named
`search.*` is also a tag of the trial's MLflow run (search/sweep/closing.py end_tags), which filters in MLflow's UI
name. Never rename one.
Not here: Optuna's own keys (`fixed_params` of an enqueued trial, `constraints`), the machine's fingerprint on the
study (`fingerprint.*`, search/measure/fingerprint.py), the tags only MLflow runs carry, and nightly's study
attributes that only nightly reads (its series, start, verdict, standing regression: search/nightly/night.py).
"""
from __future__ import annotations

# Trial: role and seeds. Search trials carry no role; enqueued ones do (search/sweep/roles.py enqueue).
# Not "search.role": MLflow runs carry that tag (trial | sweep).
ROLE_ATTR = "search.trial_role"  # trial: what it is for, one of the roles below
SEED_ATTR = "search.seed"  # trial: the train.seed it trains at, not the study's (compared only at that seed)
EXTRA_OVERRIDES_ATTR = "search.extra_overrides"  # trial: overrides it runs with on top of its parameters
ROUND_ATTR = "search.confirm_round"  # trial: its confirmation round's number, 1, 2, ... (search/sweep/confirm.py)

BASELINE = "baseline"  # role: your own configuration, measured first and more than once (search/sweep/baseline.py)
CONFIRM = "confirm"  # role: an interleaved re-measurement, a contender's or yours (search/sweep/confirm.py)
SEED_CHECK = "seed_check"  # role: the answer trained again at another seed
CONFIRMATION_ROLES = (CONFIRM, SEED_CHECK)  # runs of one confirmation: a stopped one is done again, whole

# Trial: the search's moves, enqueued in the sampler's place and measured as its proposals are.
START_ATTR = "search.start_design"  # trial: the knob a start-design trial moved (search/sweep/start_design.py)
HALFWAY_ATTR = "search.start_halfway"  # trial: the knob moved halfway back (search/sweep/start_combination.py)
COMBINED_ATTR = "search.start_combined"  # trial: the start moves it combines, their knobs comma-separated
# study system attribute: [knob, params] of the start moves no sweep had room for yet (studies written before the
# start design moved from the best so far; nothing writes it now)
DEFERRED_ATTR = "search.start_deferred"
MOVED_FROM_ATTR = "search.moved_from"  # trial: the number of the trial whose configuration a move started from
RETUNED_ATTR = "search.retuned"  # trial: the work-neutral knob (the learning rate) retuned for a fast configuration
RECIPE_ATTR = "search.recipe"  # trial: the hardware whose practitioner's first try it is (search/sweep/recipe.py)
REPEAT_ATTR = "search.repeat_of"  # trial: skipped, it repeats that trial's configuration (search/sweep/no_repeat.py)
REPLACES_ATTR = "search.replaces"  # trial: the unseen configuration that ran instead of a repeat: the repeat's number
# trial: the values changed to keep a joint proposal inside the rules (search/sweep/rule_sampler.py)
REPAIRED_ATTR = "search.repaired"
# the start design's moves (search/record/trials.py move_of)
MOVES = (START_ATTR, HALFWAY_ATTR, RETUNED_ATTR, RECIPE_ATTR, COMBINED_ATTR)

# Trial: outcome and measurement.
OUTCOME_ATTR = "outcome"  # trial: how it ended (search/record/outcomes.py)
REASON_ATTR = "reason"  # trial: why it ended so, one line ('' when ok)
METRICS_ATTR = "metrics"  # trial: metric name -> value, as the trial reported them
# trial: constraint name -> value (> 0: violated), `runnable` first (search/sweep/outcome.py)
CONSTRAINTS_ATTR = "search.constraints"
# trial: the number of the trial whose trained accuracy a throughput-only trial carries (search/sweep/staging.py)
ACCURACY_FROM_ATTR = "search.accuracy_from"
OVERRIDES_ATTR = "overrides"  # trial: the Hydra overrides the sweeper launched it with (search/sweep/reproduce.py)
SLOTS_ATTR = "search.slots"  # trial: the device slots it ran on, indices comma-separated (search/sweep/trial_loop.py)
LAUNCHED_ATTR = "search.launched_unix_s"  # trial: when its job was launched, Unix seconds
ENDED_ATTR = "search.ended_unix_s"  # trial: when its job returned, Unix seconds
MLFLOW_RUN_ID_ATTR = "mlflow_run_id"  # trial: the id of its MLflow run
MLFLOW_PARENT_RUN_ID_ATTR = "mlflow_parent_run_id"  # trial: the id of its sweep's MLflow run

# Workers and recovery (search/sweep/recovery.py, search/sweep/workers.py, search/sweep/roles.py).
WORKER_ATTR = "search.worker"  # trial: the worker (recovery.worker_id) that runs it; also a tag of the sweep's run
HEARTBEAT_ATTR = "search.heartbeat_unix_s"  # trial: when that worker last said it is alive, Unix seconds
RETRIES_ATTR = "search.retries"  # trial: a retry's count, 1, 2, ... (its configuration's run stopped with its sweep)
RETRY_OF_ATTR = "search.retry_of"  # trial: a retry: the number of the stopped trial it runs again (recovery.retry)
STOPPED_BY_ATTR = "search.stopped_by"  # trial: the signal that stopped it with its sweep (search/sweep/closing.py)
SET_ASIDE_ATTR = "search.set_aside"  # trial: waiting, closed while the answer was confirmed (roles.set_aside_waiting)
PUT_BACK_OF_ATTR = "search.put_back_of"  # trial: enqueued again in place of a set-aside trial: that trial's number
CONFIRMER_ATTR = "search.confirming_worker"  # study system attribute: {"worker", "at_unix_s"}: who confirms
WORKER_STATE_PREFIX = "search.worker_state:"  # study system attributes: this + a worker id -> that worker's state

# Study: identity, settings, answer.
# The names of the metrics the study's values are (hydra.sweeper.metrics). The stored name predates that
# setting's name and stays, so that studies written before still read.
METRIC_NAMES_ATTR = "search.objectives"  # study: list of metric names, one per value (search/sweep/study.py)
APP_ATTR = "search.app_command"  # study: the command that runs one of its configurations, given its overrides (export)
STUDY_ID_ATTR = "search.study_id"  # study system attribute: its id, 12 hex digits its first sweep made (study.py)
TOLERANCE_ATTR = "search.accuracy_tolerance"  # study: the last sweep's hydra.sweeper.accuracy_tolerance
# study: the settings every trial shares, with their sources' digests (search/sweep/fixed_config.py)
FIXED_ATTR = "search.fixed_config"
ANSWER_ATTR = "search.answer"  # study: the confirmed answer, Answer.to_dict(), its "trials" among them

# Nightly (search/nightly/night.py): the keys that other parts read.
NIGHTLY_ROLE_ATTR = "search.nightly.role"  # trial: one of the nightly roles below; also an MLflow tag
NIGHTLY_INCUMBENT = "incumbent"  # nightly role: last night's answer, measured again
NIGHTLY_STANDING = "standing"  # nightly role: the configuration whose regression stands since a night
NIGHTLY_WARM_START = "warm_start"  # nightly role: an earlier night's best other configuration
NIGHTLY_TOP_UP = "top_up"  # nightly role: tonight's answer, trained again so tomorrow has repeats
# Nightly's repeats that are its regression tests' measurements tonight: last night's answer's, and those of the
# configuration whose regression stands since an earlier night.
NIGHTLY_TESTED = (NIGHTLY_INCUMBENT, NIGHTLY_STANDING)

# What a trial was enqueued as, set when it was enqueued: a retry of it (search/sweep/recovery.py) is the same
# trial again. Without them a killed baseline run came back as a plain trial, at the study's seed.
ENQUEUED_AS = (ROLE_ATTR, SEED_ATTR, EXTRA_OVERRIDES_ATTR, ROUND_ATTR, NIGHTLY_ROLE_ATTR, START_ATTR, HALFWAY_ATTR,
               COMBINED_ATTR, RETUNED_ATTR, RECIPE_ATTR, MOVED_FROM_ATTR, REPLACES_ATTR)
# Enqueued in the sampler's place, proposals in every other way (early stopping and staging apply): a repeat's
# replacement (search/sweep/no_repeat.py), the start design's moves, a move halfway back, a combination.
PROPOSALS_ENQUEUED = (REPLACES_ATTR, START_ATTR, HALFWAY_ATTR, COMBINED_ATTR, RETUNED_ATTR, RECIPE_ATTR)
