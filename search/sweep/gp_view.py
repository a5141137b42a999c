"""How Optuna's GPSampler sees the study: knobs in order, and the answer's question.

The study keeps what ran (every knob's value, both metrics, every
constraint), so the front in the table, the report, optuna-dashboard and
MLflow read the trials as they are. Only the GP's view changes, in four ways:

- **Numeric choices in order.** `batch_size=choice(32, 64, 128, 256)` is a
  categorical distribution, and the GP's kernel treats the choices of a
  categorical as unrelated: having measured 32 and 256 tells it nothing of
  64 and 128, so on a grid of choices it learns little more than random
  search does. A categorical whose choices are all numbers is shown to it as
  their rank, an int 0..k-1 in numeric order (a log-spaced list of choices,
  as batch sizes and learning rates are written, becomes evenly spaced), so
  its kernel can learn that larger batches train faster and, past some
  size, less accurately. Choices that are not numbers (`precision`) stay
  categorical.
- **The answer's question** (`hydra.sweeper.search_for=answer`, the
  default). The answer is the fastest configuration whose val_accuracy is at
  least the baseline's minus `hydra.sweeper.accuracy_tolerance`
  (search/sweep/answer.py); a two-objective GP spreads its trials along the
  whole (throughput, accuracy) front, most of which can never be the answer.
  Once the baseline has measured its accuracy, the GP sees one value,
  throughput, to maximise, and one more constraint, `val_accuracy >= floor`,
  beside the study's own (`runnable` and the user's), and its constrained
  expected improvement proposes the configuration it expects to be fastest
  among those it believes reach the floor. Before the floor is known, with
  `search_for=front`, and for a sweep that does not maximise both metrics,
  it sees both values as they are.
  A trial early stopping ended (search/sweep/early_stopping.py) is told to
  the study with its probe throughput, the worst accuracy seen and
  infeasible, which keeps every report from taking it for an answer; in
  this view it is what it is: slow, its accuracy and feasibility unknown
  (its constraints shown at 0, the boundary), so the GP's accuracy model
  does not learn a made-up accuracy for its maths. Where its maths (every
  knob but the speed-only ones, search/sweep/staging.py) trained to the end
  at the study's seed, its accuracy is known: that run's, as a throughput-only
  trial of the same maths is scored (`same_maths`, this package's trials).
  Shown at the boundary instead, a stopped `batch_size=128` with 0 loader
  workers said "at the floor" beside the same batch with 2 workers trained
  to 0.875 (floor 0.973, a default CPU sweep of 2026-12-02): the GP could
  only read the gap as the workers' doing, and learnt that speed-only knobs
  move accuracy.

- **The pick weighs the cost** (searching for the answer with staging, on a
  small finite space): every configuration is scored by its expected
  improvement for what it would cost, a timed-only run of maths that trained
  at the floor counted as certain to reach it and at its measured share of a
  full training (search/sweep/per_second.py).

- **Constraints as one list.** Each trial's constraints are shown as one
  list, `runnable` first, whether the study wrote them that way or as
  `constraints:<name>` keys (studies this package wrote before): Optuna
  5.1's GPSampler stops with "The constraint names must be the same for all
  trials" on a study holding both (`_in_order`).

Other samplers are not wrapped (TPE reads constraints only through its own
`constraints_func`; random and grid sampling have no model).
"""
from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.samplers import BaseSampler
from optuna.study import StudyDirection
from optuna.study._constrained_optimization import _CONSTRAINTS_KEY
from optuna.trial import FrozenTrial, TrialState

from search.record import ACCURACY, RUNNABLE, STOPPED_EARLY, THROUGHPUT, metrics, named_constraints, outcome
from search.sweep.baseline import accuracy_floor
from search.sweep.per_second import Known, pick_per_cost, picking
from search.sweep.staging import maths_key, trained_fully
from search.sweep.wrapped_sampler import WrappedSampler

Floor = Callable[[optuna.Study], "float | None"]  # the study's accuracy floor, None while unknown


def _ranked(dist: BaseDistribution) -> list[Any] | None:
    """A categorical's choices in numeric order when every one is a number; else None."""
    if not isinstance(dist, CategoricalDistribution) or len(dist.choices) < 2:
        return None
    if not all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in dist.choices):
        return None
    return sorted(dist.choices)


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """The GP's ask on one of torch's intra-op threads, torch's setting as it was after. Optuna limits its
    kernel fit and its acquisition's optimisation so (optuna/_gp/thread_limiting.py), not the rest of an ask,
    whose many small tensor operations otherwise wake one OpenMP thread per core: on a many-core GPU box every
    core, those the other device slots' trials are being timed on among them. The sweep's process computes
    nothing else with torch while it asks (a user's in-process task runs after), and the trials' own processes
    keep their own setting. Measured on 2 cores: scripts/bench/gp_threads.py, docs/BENCHMARKS.md.

    It never imports torch (1.8 s of CPU on the first trial's critical path, where the GP fits nothing yet):
    an ask before torch is imported, in this process or by the imports ahead (search/sweep/sweeper.py), runs
    as Optuna runs it; that is at most the GP's first fit, which imports torch itself."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "set_num_threads"):  # not imported, or still being imported
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class GPView(WrappedSampler):
    def __init__(self, base: BaseSampler, floor: Floor | None, metric_names: Sequence[str],
                 stopped_unknown: bool = True, same_maths: bool = False, known: Known | None = None):
        super().__init__(base)
        self._floor = floor  # None: search_for=front, both values as they are
        self._stopped_unknown = stopped_unknown  # False: a stopped trial as told (infeasible; the replay's "before")
        self._same_maths = same_maths  # a stopped trial's accuracy is its maths' where that trained (our trials)
        self._known = known  # staging's knowledge: the GP's pick weighs each configuration's cost (per_second.py)
        names = list(metric_names)
        self._throughput = names.index(THROUGHPUT) if floor is not None else -1
        self._accuracy = names.index(ACCURACY) if floor is not None else -1
        self._shape: tuple[int, int] | None = None  # (values, constraints) the GP was last shown

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return self.base.sample_relative(study, trial, search_space)
        with one_torch_thread():
            return self._sample_relative(study, trial, search_space)

    def _sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                         search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        ranks = {name: r for name, d in search_space.items() if (r := _ranked(d)) is not None}
        floor = self._floor(study) if self._floor is not None else None
        view = _View(study, ranks, floor, self._throughput, self._accuracy, self._stopped_unknown,
                     self._same_maths)
        shape = (len(view.directions), view.n_constraints())
        if shape != self._shape:
            # GPSampler warm-starts each value's and each constraint's GP from its last fit, by position:
            # when the view changes (the floor found: one value, one more constraint) they start afresh.
            for cache in ("_gprs_cache_list", "_constraints_gprs_cache_list"):
                if hasattr(self.base, cache):
                    setattr(self.base, cache, None)
            self._shape = shape
        shown = {name: IntDistribution(0, len(ranks[name]) - 1) if name in ranks else d
                 for name, d in search_space.items()}
        pick = pick_per_cost(study, trial.params, ranks, self._known) \
            if self._known is not None and floor is not None else None
        with picking(self.base, pick):
            params = self.base.sample_relative(view, trial, shown)
        return {name: ranks[name][int(v)] if name in ranks else v for name, v in params.items()}


class _View:
    """The study as the GP is shown it: numeric choices as their ranks and, when `floor` is known,
    throughput as the one value and `floor - val_accuracy` as one more constraint. Everything else
    (storage, attributes) is the study's: what the GP writes (its proposal, for other workers) goes
    to the study's trial, in ranks, which other workers' views read back the same way."""

    def __init__(self, study: optuna.Study, ranks: Mapping[str, list[Any]], floor: float | None, throughput: int,
                 accuracy: int, stopped_unknown: bool = True, same_maths: bool = False):
        self._study = study
        self._ranks = ranks
        self._index = {name: {c: i for i, c in enumerate(r)} for name, r in ranks.items()}
        self._floor = floor
        self._throughput = throughput
        self._accuracy = accuracy
        self._stopped_unknown = stopped_unknown
        self._maths_accuracy = _trained_accuracy(study) if same_maths and floor is not None else {}
        self.directions = [StudyDirection.MAXIMIZE] if floor is not None else study.directions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _is_multi_objective(self) -> bool:
        return len(self.directions) > 1

    def n_constraints(self) -> int:
        done = self._study._get_trials(deepcopy=False, states=(TrialState.COMPLETE,), use_cache=False)
        return (len(done[-1].constraints) if done else 0) + (self._floor is not None)

    def _get_trials(self, deepcopy: bool = False, states: Any = None, use_cache: bool = False) -> list[FrozenTrial]:
        return [self._shown(t) for t in self._study._get_trials(deepcopy=False, states=states, use_cache=use_cache)]

    def get_trials(self, deepcopy: bool = True, states: Any = None) -> list[FrozenTrial]:
        return self._get_trials(states=states)

    @property
    def trials(self) -> list[FrozenTrial]:
        return self._get_trials()

    def _shown(self, trial: FrozenTrial) -> FrozenTrial:
        shown = copy.copy(trial)
        if self._ranks:
            shown._params = {k: self._index[k].get(v, v) if k in self._index else v for k, v in trial.params.items()}
            shown._distributions = {k: IntDistribution(0, len(self._ranks[k]) - 1) if k in self._ranks else d
                                    for k, d in trial.distributions.items()}
        constraints = _in_order(trial)
        if self._floor is not None and trial.state == TrialState.COMPLETE and trial.values is not None:
            shown._values = [trial.values[self._throughput]]
            constraints = [*constraints, self._floor - trial.values[self._accuracy]]
            if self._stopped_unknown and outcome(trial) == STOPPED_EARLY:
                # slow, as its probe says; whether it is feasible: unknown, but for its maths' accuracy if trained
                known = self._maths_accuracy.get(maths_key(trial.params))
                constraints = [0.0] * (len(constraints) - 1) + [0.0 if known is None else self._floor - known]
        if constraints:
            attrs = {k: v for k, v in trial.system_attrs.items() if not k.startswith(f"{_CONSTRAINTS_KEY}:")}
            shown._system_attrs = {**attrs, _CONSTRAINTS_KEY: constraints}
        return shown


def _in_order(trial: FrozenTrial) -> list[float]:
    """The trial's constraint values as one list, `runnable` first, whichever way they were written: as one
    list (search/sweep/outcome.py) or as `constraints:<name>` keys (`trial.set_constraint`, the studies this
    package wrote before). Optuna 5.1's GPSampler requires every trial's constraints under the same names, and
    reads the two forms as different names ("0", "1" against "runnable", ...): a study resumed across the
    change would stop the GP; shown one list each, the GP reads them all by position, as Optuna 5.0 did."""
    named = named_constraints(trial)
    if RUNNABLE not in named:  # not this package's trial: its values as they are
        return list(named.values())
    return [named[RUNNABLE], *(v for k, v in named.items() if k != RUNNABLE)]


def _trained_accuracy(study: optuna.Study) -> dict[tuple, float]:
    """Each set of maths that trained to the end at the study's seed: the val_accuracy of its first such run."""
    known: dict[tuple, float] = {}
    for t in study._get_trials(deepcopy=False, states=(TrialState.COMPLETE,), use_cache=False):
        if trained_fully(t):
            known.setdefault(maths_key(t.params), metrics(t)[ACCURACY])
    return known


def asks_for_answer(metric_names: Sequence[str] | None, directions: Sequence[str]) -> bool:
    """The sweep maximises throughput and val_accuracy: the metrics the answer's question reads."""
    maximised = {m for m, d in zip(metric_names or [], directions) if d == "maximize"}
    return {THROUGHPUT, ACCURACY} <= maximised


def gp_view(sampler: BaseSampler, search_for: str, metric_names: Sequence[str] | None, directions: Sequence[str],
            tolerance: float, stopped_unknown: bool = True, same_maths: bool = False,
            known: Known | None = None) -> BaseSampler:
    """A GPSampler shown the study through GPView (the answer's question when `search_for=answer` and the
    sweep maximises both throughput and val_accuracy); any other sampler as it is. `same_maths`: the trials
    are this package's, whose speed-only knobs leave the maths unchanged (search/sweep/staging.py). `known`:
    staging's knowledge of each configuration's maths, for a pick that weighs its cost (search/sweep/per_second.py);
    used while searching for the answer only."""
    if not isinstance(sampler, optuna.samplers.GPSampler):
        return sampler
    names = list(metric_names or [])
    answer = search_for == "answer" and asks_for_answer(names, directions)
    return GPView(sampler, (lambda study: accuracy_floor(study, tolerance)) if answer else None, names,
                  stopped_unknown, same_maths, known if answer else None)
