"""Registers `hydra/sweeper=search` with Hydra.

Thin on purpose, like Hydra's own plugins: a config dataclass and a plugin
class that imports the implementation (search/sweep/sweeper.py) only when a
sweep really starts, so Hydra's plugin scan stays cheap.
"""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from hydra.plugins.sweeper import Sweeper
from omegaconf import DictConfig

_SAMPLERS = {
    "tpe": "optuna.samplers.TPESampler",
    "random": "optuna.samplers.RandomSampler",
    "cmaes": "optuna.samplers.CmaEsSampler",
    "nsgaii": "optuna.samplers.NSGAIISampler",
    "nsgaiii": "optuna.samplers.NSGAIIISampler",
    "qmc": "optuna.samplers.QMCSampler",
    "gp": "optuna.samplers.GPSampler",
    "grid": "optuna.samplers.GridSampler",  # the sweeper fills search_space from params
}
# Defaults that differ from Optuna's, from scripts/bench/search_efficiency.py (docs/BENCHMARKS.md):
# GP with 5 random startup trials (Optuna's default is 10) reached the target in 8.8 trials against 12.8;
# multivariate TPE with 5 startup trials had a better front than Optuna's TPE defaults. Replayed again on two
# grids for the sweep's answer (fastest at the baseline's accuracy), GP stays: multivariate TPE was worse on one and no
# better on the other, and telling GP the accuracy floor as a constraint helped on one grid and hurt on the other.
_SAMPLER_ARGS = {"gp": {"n_startup_trials": 5}, "tpe": {"multivariate": True, "n_startup_trials": 5}}

# Optuna's pruners for single-metric sweeps (docs/early_stopping.md); steps are evaluations, 10 per trial by default.
_PRUNERS = {
    "median": {"_target_": "optuna.pruners.MedianPruner", "n_startup_trials": 5, "n_warmup_steps": 3,
               "interval_steps": 1},
    "percentile": {"_target_": "optuna.pruners.PercentilePruner", "percentile": 25.0, "n_startup_trials": 5,
                   "n_warmup_steps": 3, "interval_steps": 1},
    "successive_halving": {"_target_": "optuna.pruners.SuccessiveHalvingPruner", "min_resource": "auto",
                           "reduction_factor": 4, "min_early_stopping_rate": 0},
    "hyperband": {"_target_": "optuna.pruners.HyperbandPruner", "min_resource": 1, "max_resource": "auto",
                  "reduction_factor": 3},
    "wilcoxon": {"_target_": "optuna.pruners.WilcoxonPruner", "p_threshold": 0.1, "n_startup_steps": 2},
    "none": {"_target_": "optuna.pruners.NopPruner"},
}


@dataclass
class NightlyConf:
    """`python -m search nightly` (conf/nightly.yaml turns it on); see search/nightly/night.py."""

    enabled: bool = False
    series: str = "nightly"  # nights with the same series (in the same storage) compare with each other
    metric: str = "throughput_samples_per_s"  # higher is better: ranks configurations, tested for regressions
    repeats: int = 5  # measurements of last night's best tonight (and of tonight's best, for tomorrow)
    warm_start: int = 3  # other good configurations of earlier nights, enqueued once each
    alpha: float = 0.01  # significance of the one-sided Welch t-test on log throughput
    min_drop: float = 0.05  # and the smallest median drop (fraction) that counts as a regression
    max_wall_s: Optional[float] = None  # stop starting search trials after this long (repeats still run)
    accept_slowdown: bool = False  # true for one night: a regression that stands since an earlier night is accepted


@dataclass
class SearchSweeperConf:
    """Keys of the old hydra-optuna-sweeper plugin, plus `metrics` (what the old plugin's users named
    `objectives`, still read with a one-line deprecation warning)."""

    _target_: str = "hydra_plugins.search_sweeper.search_sweeper.SearchSweeper"
    _recursive_: bool = False  # the sweeper builds the sampler itself (the grid sampler needs the space)
    # gp: fewest trials to the target in scripts/bench/search_efficiency.py (docs/BENCHMARKS.md)
    defaults: List[Any] = field(default_factory=lambda: ["_self_", {"sampler": "gp"}, {"pruner": "median"}])
    sampler: Any = None
    pruner: Any = None  # hydra/sweeper/pruner: Optuna's pruner on the accuracy curve of single-metric sweeps
    early_stopping: bool = True  # false: every trial trains its whole budget
    # Two metrics: a trial stops after its throughput probe when it is this fraction slower than the fastest
    # completed trial at the answer's accuracy floor (search_for=answer: it cannot be the answer then), or
    # the fastest with the best accuracy so far (search_for=front: it cannot reach the Pareto front then).
    early_stopping_margin: float = 0.1
    # ...the front's rule only once this many trials completed with both metrics: the best accuracy of the first
    # one or two trials is a poor bet (at a fixed sample budget, smaller batches often learn more and run slower).
    early_stopping_startup_trials: int = 5
    direction: Any = field(default_factory=lambda: ["maximize", "maximize"])
    # Metric names the directions apply to, when a trial returns a dict of metrics (Optuna: study.set_metric_names).
    metrics: Any = field(default_factory=lambda: ["throughput_samples_per_s", "val_accuracy"])
    objectives: Any = None  # deprecated: the old name of `metrics`; when set, it wins, with a warning

    storage: Optional[str] = None  # null: a journal file ./optuna.journal that a re-run resumes
    study_name: Optional[str] = None  # null: the objective's name (or the app's job name)
    n_trials: int = 20  # new trials started by this invocation
    n_jobs: int = 1  # trials per batch with another launcher (joblib, submitit); the basic launcher uses slots
    # Trials at once with the basic launcher, each as soon as a slot frees: auto = one per visible GPU (1 without a GPU).
    slots: Any = "auto"
    trials_per_gpu: int = 1  # > 1 lets trials share a GPU (their throughput figures then disturb each other)
    seed: Optional[int] = None  # overrides sampler.seed when set
    params: Optional[Dict[str, Any]] = None
    experiment_name: Optional[str] = None  # MLflow experiment; null: the study name
    # Rules on trial metrics, e.g. ["val_accuracy >= 0.97", "peak_pss_tree_bytes <= 4e9"].
    constraints: List[str] = field(default_factory=list)
    max_retries: int = 1  # times a trial killed with its sweep is enqueued again
    stale_after_s: float = 120.0  # a RUNNING trial of a worker on another host with no heartbeat for this long is stale
    max_failure_rate: float = 0.5  # give up (exit 3) when more crashed/timed out, once failure_min_trials ran
    failure_min_trials: int = 4
    # Before the first trial, find the largest batch_size that fits (isolated probe trials) and bound the space.
    batch_size_probe: bool = False
    # The answer (search/sweep/answer.py): the fastest configuration whose val_accuracy is at least the
    # baseline's minus this. 0.005 is half a point of accuracy, what a team usually accepts as "the same"
    # for a change that only makes training faster, and more than one validation sample of digits (1/360).
    accuracy_tolerance: float = 0.005
    # The user's own configuration (conf/ defaults plus fixed overrides, without the space) runs first, this
    # many times, never stopped early: the baseline every speedup is measured against. 0: no baseline.
    baseline_repeats: int = 2
    # Re-measuring the answer's candidates and the baseline interleaved (A B A B) before the sweep ends may
    # take at most this fraction of the search trials' time. 0: no confirmation.
    confirm_budget: float = 0.15
    confirm_candidates: int = 3  # at most this many configurations within noise of the fastest are re-measured
    # Rounds added once, over the budget, when the fastest contender is faster by its estimate but its interval
    # still holds 1 after the rounds the budget allowed (3 rounds give a wide interval). 0: never over the budget.
    confirm_undecided_rounds: int = 2
    # answer: once the baseline has its accuracy, the GP sampler maximises throughput under the accuracy floor
    # (search/sweep/gp_view.py); front: it searches the whole (throughput, accuracy) front.
    search_for: str = "answer"
    # one_knob_at_a_time: after the baseline, a fresh study's first trials move one knob each from it to the far
    # end of its values, so the GP starts from each knob's own effect (search/sweep/start_design.py; other
    # samplers keep their own start); sampler: the sampler's own start-up trials (random, for the GP).
    start_design: str = "one_knob_at_a_time"
    # After the start design's moves: one faster but below your accuracy taken halfway back, then those faster than
    # your configuration at its accuracy combined one at a time, fastest first, each kept only when it pays
    # (search/sweep/start_combination.py). false: the sampler goes on.
    start_combination: bool = True
    # Searching for the answer with the GP after the start design: the search ends once this many trials the
    # sampler proposed (not the start's) have ended in a row without making the fastest configuration at your
    # accuracy faster by more than noise (search/sweep/patience.py). null: every one of n_trials runs.
    patience_trials: Optional[int] = 3
    # A configuration whose maths (every swept knob but the speed-only ones) trained already runs throughput-only
    # and carries that accuracy (search/sweep/staging.py). false: every trial trains its whole budget.
    staging: bool = True
    # The plots at the sweep's end (<sweep dir>/report and the MLflow parent run: seconds of drawing).
    # false: none; `python -m search report --study-name <study>` writes them whenever they are wanted.
    report: bool = True
    nightly: NightlyConf = field(default_factory=NightlyConf)


ConfigStore.instance().store(group="hydra/sweeper", name="search", node=SearchSweeperConf, provider="search")
for _name, _target in _SAMPLERS.items():
    ConfigStore.instance().store(
        group="hydra/sweeper/sampler", name=_name, provider="search",
        node={"_target_": _target, "seed": None, **_SAMPLER_ARGS.get(_name, {})},
    )
for _name, _node in _PRUNERS.items():
    ConfigStore.instance().store(group="hydra/sweeper/pruner", name=_name, node=_node, provider="search")


class SearchSweeper(Sweeper):
    def __init__(self, **kwargs: Any) -> None:
        from search.sweep.sweeper import SweeperImpl

        self._impl = SweeperImpl(**kwargs)

    def setup(self, *, hydra_context: Any, task_function: Any, config: DictConfig) -> None:
        self._impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: List[str]) -> Any:
        return self._impl.sweep(arguments)
