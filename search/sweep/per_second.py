"""The GP's pick on a small finite space: the most expected improvement for what the trial would cost.

Searching for the answer with staging (the default), trials do not cost
the same, and the GP is not told. A configuration whose maths already
trained at the accuracy floor is only timed (on the default CPU space a
third to a half of a full training) and its accuracy is known: the floor
is met. A configuration of new maths trains in full, and whether it
reaches the floor is the GP's guess. Optuna's GPSampler maximises its
constrained expected improvement (log EI of the value plus the log
probability of each constraint) as if every trial cost the same, and its
own proposals of new maths are what the default sweep still trains in
full: in one sweep of 2026-12-02, five in a row (batch 256 with model
pruning, on 2 devices; 0.74-0.96 against a floor of 0.973; 4.1-4.8 s each).

So on a space of at most MAX_CONFIGURATIONS configurations, every knob a
choice or an int range, the GP's view (search/sweep/gp_view.py) scores
every configuration the GP could be asked for, as expected improvement per
unit of cost is usually written (Snoek, Larochelle and Adams, 2012), in logs:

- the log EI of its throughput and the log probability of each of the
  study's own constraints (`runnable`, the user's), as Optuna computes them;
- the log probability that its val_accuracy reaches the floor: 0 (certain)
  where its maths trained at the floor, since staging scores it with that
  accuracy, the GP's own estimate otherwise;
- less the log of its cost: the study's timed-only runs' median seconds
  over its full trainings' (search/sweep/trial_cost.py) where it would only
  be timed, 1 where it would train in full.

Configurations that cannot be the answer or cannot run are left out: those
the study has run or is running, those that break a rule, those whose maths
trained below the floor (search/sweep/settled.py), and those whose work (the
configuration less its work-neutral knobs: the learning rate) ran no faster
than the fastest configuration at the floor beyond noise, or out of memory:
another learning rate runs the same work at the same speed. The sampler
wrapper (search/sweep/rule_sampler.py) would otherwise repair them into
another trial.

The pick searches near the answer so far first, in a trust region counted
in knobs moved (as CASMOPOLITAN's Hamming-distance trust region, Wan et
al. 2021): among the configurations one knob away from a centre, while any
is left; then two; then anywhere. The centres are the configurations at
the floor within noise of the fastest (the confirmation's window, 10% or
wider: search/sweep/answer.py noise_window), since one measurement each
cannot tell them apart and the best may lie next to any of them. Each score
gets a Gumbel draw of scale EXPLORATION, seeded with the sweep's seed,
before the best is taken: the pick samples near-ties in proportion to
exp(score / EXPLORATION), so seeds explore apart. The best score is the
pick. With none left, a space too large to
list or with a float range, or an acquisition this does not take apart
(Optuna's qLogCEI, for trials that run at the same time), the GP optimises
its own acquisition as it always does. Early stopping is not priced in: a
full training slower than the bar stops at its probe, and the GP already
expects little of a slow configuration. `_optimize_acqf` is the method
Optuna names for overriding the acquisition's optimisation, without a
promise of compatibility between versions; tests/search/sweep/test_per_second.py
says when it moves.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from objectives.knobs import WORK_NEUTRAL
from search.record import CONFIRM, OOM, SEED_ATTR, THROUGHPUT, metrics, outcome, role, throughput
from search.sweep.early_stopping import at_floor, fastest_at_floor
from search.sweep.no_repeat import Resolved, configuration_key, trial_key
from search.sweep.patience import noise_of
from search.sweep.settled import Settled
from search.sweep.staging import maths_of
from search.sweep.trial_cost import timed_only_share

PROBE = "probe_throughput_samples_per_s"

# The pick's exploration: each score gets a Gumbel draw of this scale before the best is taken, so the pick
# samples configurations in proportion to exp(score / EXPLORATION) (softmax exploration): nearly the best by the
# model when one stands out, one of several when the model cannot tell them apart, different with each seed.
EXPLORATION = 0.5
MAX_CONFIGURATIONS = 4096  # a space listed in full: its posterior costs milliseconds (the default space: 576)
_RUN_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)  # as search/sweep/no_repeat.py


@dataclass(frozen=True)
class Known:
    """What the study knows of a configuration before it runs: whether its maths trained at the floor (only
    timed, the floor met) or below it (cannot be the answer), and whether it breaks a rule; the floor, which
    places the trust region; the seed of the pick's exploration."""
    reached: Settled  # search/sweep/settled.py at_floor
    settled: Settled | None  # below_floor; None: configurations of such maths are still proposed
    forbids: Callable[[Mapping[str, Any]], Any]  # Space.forbids: None when the configuration keeps to every rule
    resolved: Resolved | None = None  # Space.runs_as
    floor: Callable[[optuna.Study], "float | None"] | None = None  # the answer's floor; None: no trust region
    seed: int | None = None  # the exploration's draws
    exploration: float = 0.0  # the scale of the Gumbel draw each score gets (EXPLORATION in the sweep); 0: none


@dataclass(frozen=True)
class Standing:
    """Where the search stands: the trust region's centres, and the works that cannot beat the best."""

    centres: list[dict[str, Any]]  # configurations at the floor within noise of the fastest, as they run here
    slow_works: frozenset  # work keys (_work_of) that ran no faster than the fastest beyond noise, or out of memory


def standing(study: optuna.Study, floor: float | None, resolved: Resolved | None) -> Standing | None:
    """The study's standing at `floor`; None before a configuration reached it."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    best = fastest_at_floor(trials, floor) if floor is not None else None
    if best is None:
        return None
    runs = resolved or (lambda params: dict(params))
    noise = noise_of(trials)
    top = throughput(best)
    centres = [runs(dict(t.params)) for t in at_floor(trials, floor)
               if role(t) != CONFIRM and throughput(t) >= top * (1.0 - noise)]
    slow = set()
    for t in trials:
        m = metrics(t)
        speed = m.get(PROBE, m.get(THROUGHPUT))
        if SEED_ATTR not in t.user_attrs and (outcome(t) == OOM or (speed is not None and speed <= top * (1 + noise))):
            slow.add(_work_of(trial_key(t, resolved)))
    return Standing(centres, frozenset(slow))


Pick = Callable[[Any], "np.ndarray | None"]  # the acquisition -> the normalised configuration, None: the GP's own


def pick_per_cost(study: optuna.Study, fixed: Mapping[str, Any], ranks: Mapping[str, list[Any]],
                  known: Known) -> Pick:
    """The pick for the GP's next proposal in this study, given the trial's `fixed` values and the knobs the
    view shows as ranks (`ranks`: name -> its choices in order)."""
    reached = known.reached(study)
    settled = known.settled(study) if known.settled is not None else frozenset()
    seen = {trial_key(t, known.resolved) for t in study.get_trials(deepcopy=False, states=_RUN_STATES)}
    share = timed_only_share(study)
    near = standing(study, known.floor(study), known.resolved) if known.floor is not None else None
    runs = known.resolved or (lambda params: params)
    draws = np.random.default_rng(None if known.seed is None else known.seed + len(study.trials))

    def pick(acqf: Any) -> np.ndarray | None:
        terms = _terms(acqf)
        rows = _every_configuration(acqf.search_space)
        if terms is None or rows is None:
            return None
        value, others, accuracy = terms
        keep, only_timed, distance = [], [], []
        slow = near.slow_works if near is not None else frozenset()
        for row in rows:
            shown = acqf.search_space.get_unnormalized_param(row)
            full = {**fixed, **{k: ranks[k][int(v)] if k in ranks else v for k, v in shown.items()}}
            key = configuration_key(full, known.resolved)
            maths = maths_of(key)
            keep.append(key not in seen and maths not in settled and known.forbids(full) is None
                        and _work_of(key) not in slow)
            only_timed.append(maths in reached)
            here = runs(full)
            distance.append(min(_moved(here, c) for c in near.centres) if near is not None else 0)
        keep_ = _nearest(np.array(keep), np.array(distance))
        if not keep_.any():
            return None
        timed = np.array(only_timed)
        score = (value.eval_acqf_no_grad(rows) + sum((c.eval_acqf_no_grad(rows) for c in others), np.zeros(len(rows)))
                 + np.where(timed, 0.0, accuracy.eval_acqf_no_grad(rows)) - np.where(timed, math.log(share), 0.0))
        if known.exploration:
            score = score + known.exploration * draws.gumbel(size=len(rows))
        score[~keep_] = -np.inf
        return rows[int(np.argmax(score))]

    return pick


def _work_of(configuration: tuple) -> tuple:
    """A configuration's key less its work-neutral knobs (the learning rate): the work a step does."""
    return tuple(item for item in configuration if item[0] not in WORK_NEUTRAL)


def _moved(params: Mapping[str, Any], centre: Mapping[str, Any]) -> int:
    """How many knobs `params` set otherwise than `centre` (a key one of them leaves without effect counts)."""
    return sum(params.get(k) != centre.get(k) for k in set(params) | set(centre))


def _nearest(keep: np.ndarray, distance: np.ndarray) -> np.ndarray:
    """The trust region: of the configurations kept, those one knob from a centre; with none left, two; with
    none left, every one (a centre itself has run: it is never kept)."""
    for most in (1, 2):
        near = keep & (distance <= most)
        if near.any():
            return near
    return keep


@contextmanager
def picking(gp: optuna.samplers.GPSampler, pick: Pick | None) -> Iterator[None]:
    """`gp` optimising its acquisition with `pick` (its own way where `pick` is None or declines) while inside."""
    if pick is None:
        yield
        return
    own, before = gp._optimize_acqf, gp.__dict__.get("_optimize_acqf")

    def optimize(acqf: Any, best_params: Any) -> np.ndarray:
        chosen = pick(acqf)
        return own(acqf, best_params) if chosen is None else chosen

    gp._optimize_acqf = optimize  # type: ignore[method-assign]
    try:
        yield
    finally:
        if before is None:
            del gp._optimize_acqf  # the class's method again
        else:
            gp._optimize_acqf = before


def _terms(acqf: Any) -> tuple[Any, list[Any], Any] | None:
    """Optuna's LogCEI taken apart: the value's log EI, the study's own constraints' log probabilities, and the
    accuracy floor's (the view's last constraint); None for any other acquisition."""
    from optuna._gp.acqf import LogCEI

    value, constraints = getattr(acqf, "_acqf", None), getattr(acqf, "_constraints_acqf_list", None)
    if type(acqf) is not LogCEI or value is None or not constraints:
        return None
    return value, list(constraints[:-1]), constraints[-1]


def _every_configuration(space: Any) -> np.ndarray | None:
    """Every configuration of the GP's search space, normalised as it reads them (one row each); None when a
    knob is a float range or there are more than MAX_CONFIGURATIONS."""
    if len(space.continuous_indices) or list(space.discrete_indices) != list(range(space.dim)):
        return None
    choices = space.get_choices_of_discrete_params()
    if math.prod(len(c) for c in choices) > MAX_CONFIGURATIONS:
        return None
    return np.array(list(itertools.product(*choices)), dtype=float)
