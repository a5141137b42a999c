"""Confirmation: before the sweep ends, the answer's contenders and the baseline are measured again,
interleaved, and the answer is trained again at a second seed (unless it has your maths: 3.).

1. The contenders: the configurations at the baseline's accuracy (minus the
   tolerance) whose search throughput is within noise of the fastest (10%,
   or the spread of the baseline's own runs when that is larger),
   at most `hydra.sweeper.confirm_candidates`, the baseline's own
   configuration left out (it is measured in every round anyway).
2. Rounds: the baseline and each contender once per round, the order
   reversed every other round (B C1 C2, C2 C1 B, ...) so a drift of the
   machine hits all alike; 3 rounds at least (fewer give no interval), more
   while the budget lasts, and `hydra.sweeper.confirm_undecided_rounds` (2)
   more, once, when the fastest contender is faster by its estimate but its
   interval still holds 1. With staging
   (search/sweep/staging.py) these are throughput-only trials, so a round
   costs a fraction of a trial.
3. The answer is picked (search/sweep/answer.py), then trained to the end at
   `train.seed + 1` (the baseline's second run, search/sweep/baseline.py, is
   at that seed too). The check compares the means of the two seeds: the
   answer's val_accuracy at both seeds against the baseline's at both, at
   `hydra.sweeper.accuracy_tolerance`. One run's accuracy moves by more than
   the tolerance from seed to seed on a small validation set (digits: 360
   samples, 0.28 points each; its runs at two seeds differ by up to 2
   points), so a check on the second seed alone failed contenders two
   validation samples apart; the mean of two seeds halves that noise and
   uses every run there is. A failed check passes the answer to the next
   contender that beats the baseline. With staging, an answer with your
   maths (only speed-only knobs moved) trains nothing more: your runs at
   both seeds stand for it, as your run stood for it in the search, and its
   accuracy was never a draw it was picked for (no winner's curse to check),
   so the check passes by construction (`your_maths` in it). Before, in two
   default CPU sweeps of 2026-12-01 that answered `loader.num_workers=2`,
   the check was a whole training (5-6 s) that matched your run at seed 1
   to the last digit (0.9916 both).
4. When every contender tried failed its check, the fastest configuration
   with the baseline's maths (only speed-only knobs moved: workers, threads,
   ...; search/sweep/staging.py) that ran in the search is confirmed in its
   place: 3 more rounds against the baseline (2 more when undecided, as
   above); its check passes by construction (3.). Its accuracy
   is the baseline's by construction, so a contender that lost accuracy at
   the second seed does not leave the user with no answer when a faster
   loader or thread count was found. This costs only when a check failed.
5. When no contender was faster beyond noise, the fastest configuration at
   the floor not measured again yet is, once (`_next_in_line`), if the
   search saw it faster than the baseline by more than noise and than the
   contenders measured in the rounds: the contenders' window hangs on the
   search's fastest run, and one lucky run moved it past a real speedup.

The budget is `hydra.sweeper.confirm_budget` (0.15) of the search's wall time:
fewer contenders first, then the minimum of 3 rounds and one check, said in a
line when that minimum is over the budget. Each configuration's run in a round
costs what its own trials took (`run_cost_s`: its timed-only runs, else its
full runs less their evaluation and the steps a timed-only run leaves out),
the check what the contender's full runs took: a study-wide median let one
configuration's compile stand for every run.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

import optuna
from optuna.trial import TrialState

from objectives.timing import throughput_only_steps
from search.record import (ACCURACY, ANSWER_ATTR, CONFIRM, MEMORY_METRICS, OK, ROUND_ATTR, SEED_ATTR, SEED_CHECK,
                           THROUGHPUT, WORKER_ATTR, Answer, Contender, Ratio, ended_unix_s, metrics, outcome, role)
from search.reports.choose import Candidate, candidates, key
from search.sweep.answer import Idle, changed_text, eligible, no_idle, noise_window, paired, pick, within_noise
from search.sweep.baseline import baseline_accuracy, baseline_trials
from search.sweep.constraints import broken_text, parse_constraints
from search.sweep.roles import enqueue
from search.sweep.space import to_override
from search.sweep.staging import maths_key
from search.sweep.trial_cost import median_s, ran_ok, wall_s

if TYPE_CHECKING:
    from search.sweep.trial_loop import SweepRun

MIN_ROUNDS, MAX_ROUNDS = 3, 8
RunTrials = Callable[[int], None]  # runs that many enqueued trials, in order


def _contender(c: Candidate, base_params: Mapping[str, Any]) -> Contender:
    m = c.metrics
    memory = next((m[k] for k in MEMORY_METRICS if k in m), math.inf)
    return Contender(dict(c.params), m[THROUGHPUT], m.get(ACCURACY), int(c.params.get("parallel.devices", 1)),
                     memory, [t.number for t in c.trials], maths_key(c.params) == maths_key(base_params))


def _done(study: optuna.Study, throughput_only: bool,
          params: Mapping[str, Any] | None = None) -> list[optuna.trial.FrozenTrial]:
    """The trials of that kind (timed-only or full) that ended ok with a wall time; of `params` only when given."""
    return ran_ok(study, throughput_only, None if params is None else (lambda t: key(t.params) == key(params)))


def _timed_only_of_full_s(t: optuna.trial.FrozenTrial, train: Any) -> float | None:
    """What a full trial's run would have cost timed only: its wall less its evaluations and the training of the
    steps past `throughput_only_steps` (objectives/timing.py), at its timed step time; None without the figures."""
    m = metrics(t)
    steps = int(m.get("steps", 0))
    if train is None or steps <= 0:
        return None
    step_s = m["step_time_p50_ms"] / 1000 if "step_time_p50_ms" in m else m.get("train_wall_s", 0.0) / steps
    skipped_s = (m.get("eval_wall_s", 0.0) + m.get("early_stop_eval_wall_s", 0.0)
                 + (steps - throughput_only_steps(train, steps)) * step_s)
    return wall_s(t) - skipped_s if wall_s(t) > skipped_s else None


def run_cost_s(study: optuna.Study, params: Mapping[str, Any], throughput_only: bool, train: Any = None) -> float:
    """One confirmation run of `params`, from its own trials: the runs of other configurations cost otherwise (a
    shortened GPU sweep estimated 323 s from the one timed-only trial of the search, a torch.compile of
    gpt2-small, for a confirmation of two eager configurations that took 96 s). Timed only: the median of its
    timed-only trials, else of its full ones less what a timed-only run skips (`train`: the trials' train config,
    train.probe_steps and the windows; None: not derived); full: the median of its full trials; else the
    study's median of that kind (trial_cost.median_s)."""
    timed = [wall_s(t) for t in _done(study, True, params)] if throughput_only else []
    full = _done(study, False, params)
    if throughput_only and not timed:
        timed = [s for s in (_timed_only_of_full_s(t, train) for t in full) if s is not None]
    walls = timed if throughput_only else [wall_s(t) for t in full]
    return statistics.median(walls) if walls else median_s(study, throughput_only)


def _round_throughputs(study: optuna.Study, params: Mapping[str, Any], first_trial: int) -> dict[int, float]:
    """Round number -> throughput of the configuration's confirmation trials since `first_trial` (a round that
    did not end ok is missing: pairs are made by round number, never by position)."""
    out = {}
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if t.number >= first_trial and role(t) == CONFIRM and key(t.params) == key(params) \
                and outcome(t) == OK and THROUGHPUT in metrics(t):
            out[int(t.user_attrs[ROUND_ATTR])] = float(metrics(t)[THROUGHPUT])
    return out


def _paired(study: optuna.Study, base: Mapping[str, Any], c: Mapping[str, Any],
            first_trial: int) -> tuple[list[float], list[float]]:
    return paired(_round_throughputs(study, c, first_trial), _round_throughputs(study, base, first_trial))


def _rounds_run(study: optuna.Study, first_trial: int) -> list[int]:
    """The round numbers the confirmation started at trial `first_trial` has enqueued so far (and run)."""
    return sorted({int(t.user_attrs[ROUND_ATTR]) for t in study.get_trials(deepcopy=False)[first_trial:]
                   if role(t) == CONFIRM and ROUND_ATTR in t.user_attrs})


def confirm(run: SweepRun, run_trials: RunTrials, base_params: dict[str, Any], seed: int | None,
            overrides_of: Callable[[Mapping[str, Any]], list[str]], say: Callable[[str], None],
            idle: Idle = no_idle, train: Any = None, since_unix_s: float | None = None) -> Answer | None:
    """Measure, pick and check the answer; None (with a line said) when there is nothing to state. `idle`: the keys
    a configuration's other values leave without effect, left out of the lines that name it (changed_text).
    `train`: the trials' train config, for the cost of a timed-only run of a configuration that only trained in
    full (run_cost_s). `since_unix_s`: when this worker joined the study; an answer another worker confirmed
    after that stands when nothing measured here since could change it (standing_answer)."""
    settings, study = run.settings, run.study
    search_wall_s = time.monotonic() - run.started_s
    first_trial = len(study.trials)  # the confirmation's trials are those from here on
    trials = study.get_trials(deepcopy=False)
    base_trials = [t for t in baseline_trials(study) if t.state == TrialState.COMPLETE and outcome(t) == OK]
    if not base_trials:
        say("no answer: the baseline (your configuration) has no run that ended ok, so there is no speedup to state")
        return None
    base_metrics = [metrics(t) for t in base_trials]  # its throughput at any seed
    base_accuracy = baseline_accuracy(study)  # at the study's seed when that run ended ok
    floor = None if base_accuracy is None else base_accuracy - settings.accuracy_tolerance
    guarded = floor is not None or bool(settings.constraints)
    if not guarded:
        say("no accuracy to hold: your configuration measured no val_accuracy at your seed and "
            "hydra.sweeper.constraints is empty, so the answer moves only knobs that keep your model's maths "
            "(loader, threads, compile, ...); to let it change batch size, precision or model pruning, bound your "
            "quality metric, e.g. \"hydra.sweeper.constraints=['val_loss <= 0.15']\"")
    found_ok = candidates(trials)
    base_breaks = _breaks(settings.constraints, base_params, base_trials, found_ok)
    ranked = eligible([_contender(c, base_params) for c in found_ok if THROUGHPUT in c.metrics], floor, guarded)
    base_throughputs = [m[THROUGHPUT] for m in base_metrics if THROUGHPUT in m]
    noise = noise_window(base_throughputs)
    contenders = [c for c in within_noise(ranked, noise, settings.confirm_candidates + 1)
                  if key(c.params) != key(base_params)][:settings.confirm_candidates]

    def answer_of(params: Mapping[str, Any], ratio: Ratio | None, val_accuracy: float | None, **kw: Any) -> Answer:
        r = ratio or Ratio(1.0, 1.0, 1.0, 0)
        if unchecked and key(params) != key(base_params) and "seed_check" in kw and kw["seed_check"] is None:
            kw["note"] = "; ".join(filter(None, [kw.get("note", ""), unchecked]))
        return Answer(dict(params), overrides_of(params), key(params) == key(base_params), r.estimate, r.low,
                      r.high, r.rounds, val_accuracy, base_accuracy, settings.accuracy_tolerance,
                      baseline_trials=[t.number for t in base_trials], search_wall_s=search_wall_s,
                      confirm_rounds=len(_rounds_run(study, first_trial)),
                      your_maths=maths_key(params) == maths_key(base_params) and key(params) != key(base_params),
                      baseline_breaks=base_breaks, **kw)

    def none_meets(why: str) -> None:
        """Your configuration breaks your constraints: it cannot be the answer, and nothing else was one."""
        say(f"no answer: your configuration does not meet hydra.sweeper.constraints ({base_breaks}) and {why}; "
            f"fix: a bound a configuration of the space can meet, or a space or budget (train.budget_samples) that "
            f"meets it")

    def moved(params: Mapping[str, Any]) -> str:
        return changed_text(params, base_params, idle)

    unchecked = ""  # the answer's note when its second-seed check was due and did not run

    def check_of(c: Contender) -> dict[str, Any] | None:
        """Its second-seed check; None when there is no seed or accuracy to check, or when its runs did not end
        ok (said, and noted on the answer: a check that did not run is not a check that passed)."""
        nonlocal unchecked
        if seed is None or base_accuracy is None or c.val_accuracy is None:
            return None
        check = _seed_check(run, run_trials, c.params, base_params, seed, (c.val_accuracy, base_accuracy))
        if check is None:
            unchecked = (f"the second-seed check of {moved(c.params)} did not run: its runs at train.seed={seed + 1} "
                         f"did not end ok, so its accuracy is from train.seed={seed} alone")
            say(unchecked)
        return check

    def beats_baseline(ratio: Ratio) -> bool:
        """Faster beyond noise; any speed, when your configuration breaks your constraints and the contender not."""
        return bool(base_breaks) or (not ratio.holds(1.0) and ratio.estimate > 1.0)

    if not contenders and base_breaks:
        return none_meets("no other configuration that ran does")
    if not contenders:
        return answer_of(base_params, None, base_accuracy,
                         note=f"the fastest at its accuracy; no other configuration came within {noise:.0%} of it"
                         if len(ranked) > 1 else "no other configuration ran to an answer at its accuracy")
    if (standing := standing_answer(study, since_unix_s, base_params, base_accuracy, contenders,
                                    settings.accuracy_tolerance)) is not None:
        answer, stands = standing
        say(f"confirmation: the study's answer, {moved(answer.params)}, was {stands}")
        answer.search_wall_s = search_wall_s
        return answer
    if settings.confirm_budget <= 0:
        best = contenders[0]
        ratio = best.throughput / (throughput_of(study, base_params) or statistics.median(base_throughputs))
        return answer_of(best.params, Ratio(ratio, 0.0, math.inf, 0), best.val_accuracy,
                         note="not confirmed (hydra.sweeper.confirm_budget=0): one search measurement each, no interval")

    budget_s = settings.confirm_budget * search_wall_s
    within = contenders
    found = len(within)
    base_run_s = run_cost_s(study, base_params, run.staging, train)  # a round's run of each, from its own trials
    run_s = [run_cost_s(study, c.params, run.staging, train) for c in within]
    check_s = [0.0 if your_maths(run.staging, c.params, base_params) else run_cost_s(study, c.params, False)
               for c in within]
    if seed is not None and base_accuracy is not None and _accuracy_at(study, base_params, seed + 1) is None:
        # the check trains your configuration at the next seed too when no run of it ended ok there
        # (hydra.sweeper.baseline_repeats=1): the estimate and the budget count it (they left it out before)
        check_s = [s + run_cost_s(study, base_params, False) for s in check_s]
    contenders = within_budget(within, base_run_s, run_s, check_s, budget_s)
    run_s, check_s = run_s[:len(contenders)], check_s[:len(contenders)]

    def not_confirmed(measured_again: set[tuple] = frozenset()) -> list[dict[str, Any]]:
        """The contenders the budget left out (the slowest), but those measured again since, with their search
        speedup over the baseline's throughput as the front table's `vs base` has it (throughput_of)."""
        base = throughput_of(study, base_params)
        return [{"params": dict(c.params), "overrides": overrides_of(c.params), "trials": c.trials,
                 "search_speedup": c.throughput / base if base else None}
                for c in within[len(contenders):] if key(c.params) not in measured_again]

    start = time.monotonic()
    configs = [base_params] + [c.params for c in contenders]
    left_out = (f" ({found - len(contenders)} more within noise left out by the budget, the slowest first; "
                f"hydra.sweeper.confirm_budget)") if found > len(contenders) else ""
    say(f"confirming: your configuration and {len(contenders)} contender(s) within noise of the fastest, "
        f"re-measured in interleaved rounds (budget {budget_s:.0f} s, {settings.confirm_budget:.0%} of the "
        f"search){left_out}{over_budget_note(base_run_s, run_s, check_s, budget_s)}")

    def measured() -> list[tuple[Contender, Ratio, dict[int, float]]]:
        """Each contender with its paired speedup over the rounds so far and its throughput by round number."""
        out = []
        base_rounds = _round_throughputs(study, base_params, first_trial)
        for c in contenders:
            by_round = _round_throughputs(study, c.params, first_trial)
            ratio = Ratio.of(*paired(by_round, base_rounds))
            if ratio is not None and ratio.rounds >= 2:
                out.append((c, ratio, by_round))
        return out

    round_s = base_run_s + sum(run_s)
    rounds = _rounds(study, run_trials, configs, round_s,
                     lambda spent, per_round: spent + per_round + max(check_s) > budget_s)
    undecided_rounds = settings.confirm_undecided_rounds
    _more_if_undecided(study, run_trials, configs, round_s, rounds, undecided_rounds, say,
                       lambda: max((ratio for _, ratio, _ in measured()), key=lambda r: r.estimate, default=None))
    confirmed = measured()
    if not confirmed and base_breaks:
        return none_meets("no contender's confirmation runs ended ok")
    if not confirmed:
        return answer_of(base_params, None, base_accuracy, note="no contender's confirmation runs ended ok, so "
                                                                "no speedup is confirmed",
                         confirm_wall_s=time.monotonic() - start)
    chosen, tied, rule = pick(confirmed)
    order = [chosen] + [i for i in sorted(range(len(confirmed)), key=lambda i: -confirmed[i][1].estimate)
                        if i != chosen]
    failed_check = None  # (speedup, check) of the first contender faster beyond noise whose second-seed check failed
    for i in order[:2]:
        c, ratio, _ = confirmed[i]
        if not beats_baseline(ratio):
            break
        check = check_of(c)
        if check is None or check["passed"]:
            return answer_of(c.params, ratio, c.val_accuracy, seed_check=check, rule=rule,
                             tied_with=[confirmed[j][0].params for j in tied] if i == chosen else [],
                             trials=c.trials, confirm_wall_s=time.monotonic() - start, not_confirmed=not_confirmed())
        say(f"the second-seed check failed for {moved(c.params)}: {check_text(check)}")
        failed_check = failed_check or (ratio, check)
    best = confirmed[order[0]]
    tried = {key(c.params) for c, _, _ in confirmed}  # measured in the rounds
    speedups = [(c, ratio) for c, ratio, _ in confirmed]  # every contender measured, the ones below added

    def pair_ratio(params: Mapping[str, Any]) -> Ratio | None:
        """3 more interleaved rounds of `params` against the baseline (2 more when undecided), over the budget,
        numbered on from the confirmation's last round."""
        first, pair = len(study.trials), [base_params, params]
        number_from = max(_rounds_run(study, first_trial), default=0) + 1
        pair_round_s = base_run_s + run_cost_s(study, params, run.staging, train)
        rounds = _rounds(study, run_trials, pair, pair_round_s, lambda spent, per_round: True,
                         number_from=number_from)
        _more_if_undecided(study, run_trials, pair, pair_round_s, rounds, undecided_rounds, say,
                           lambda: Ratio.of(*_paired(study, base_params, params, first)), number_from)
        ratio = Ratio.of(*_paired(study, base_params, params, first))
        return ratio if ratio is not None and ratio.rounds >= 2 else None

    def confirmed_instead(c: Contender, rule: str, note: str, what: str) -> tuple[Answer | None, str]:
        """Its rounds and its check: the answer when it beats the baseline and passes, else the note, longer."""
        ratio = pair_ratio(c.params)
        tried.add(key(c.params))
        if ratio is not None:
            speedups.append((c, ratio))
        if ratio is not None and beats_baseline(ratio):
            check = check_of(c)
            if check is None or check["passed"]:
                return answer_of(c.params, ratio, c.val_accuracy, seed_check=check, rule=rule, trials=c.trials,
                                 confirm_wall_s=time.monotonic() - start, note=note,
                                 not_confirmed=not_confirmed(tried)), note
            say(f"the second-seed check failed for {moved(c.params)}: {check_text(check)}")
        return None, note + f"; {moved(c.params)} ({what}): " + (
            ratio.text() if ratio is not None else "its rounds did not end ok")

    if failed_check is not None:  # faster beyond noise, but not as accurate at the second seed
        ratio, check = failed_check
        note = (f"a contender faster than your configuration beyond noise failed the second-seed accuracy check "
                f"({ratio.text()}; {check_text(check)})")
        checked = {key(confirmed[i][0].params) for i in order[:2]}
        same = next((c for c in ranked if maths_key(c.params) == maths_key(base_params)
                     and key(c.params) != key(base_params) and key(c.params) not in checked
                     and c.throughput > max(base_throughputs, default=math.inf)), None)  # faster in the search
        if same is not None:
            say(f"confirming instead: {moved(same.params)}, your configuration's maths with "
                f"speed-only knobs moved (its accuracy is yours), in {MIN_ROUNDS} more interleaved rounds")
            answer, note = confirmed_instead(same, "your configuration's maths, after a faster contender's check "
                                                   "failed", note, "speed-only knobs")
            if answer is not None:
                return answer
    else:
        note = f"no configuration was faster beyond noise (the fastest contender: {best[1].text()})"
        base = throughput_of(study, base_params)
        following = _next_in_line(ranked, tried | {key(base_params)}, base, noise, best[1])
        if following is not None:
            say(f"confirming next: {moved(following.params)}, "
                f"{following.throughput / base:.2f}x your configuration in the search, faster there than the "
                f"contenders within noise of the fastest measured here ({best[1].text()}), in {MIN_ROUNDS} more "
                f"interleaved rounds")
            answer, note = confirmed_instead(following, "the next fastest in the search, after the contenders within "
                                                        "noise of its fastest were not faster", note,
                                             "the next fastest in the search")
            if answer is not None:
                return answer
    if base_breaks:
        return none_meets("no contender that does passed its second-seed check")
    left = not_confirmed(tried)
    if left:
        note += (f"; {len(left)} more contender(s) within noise were not confirmed (the budget, "
                 f"hydra.sweeper.confirm_budget)")
    top, ratio = max(speedups, key=lambda s: s[1].estimate)  # the next in line and one instead among them
    fastest = {"params": dict(top.params), "overrides": overrides_of(top.params), "speedup": ratio.estimate,
               "ci_low": ratio.low, "ci_high": ratio.high, "rounds": ratio.rounds}
    return answer_of(base_params, None, base_accuracy, confirm_wall_s=time.monotonic() - start, note=note,
                     not_confirmed=left, fastest_contender=fastest)


def _ended_unix_s(t: optuna.trial.FrozenTrial) -> float:
    ended = ended_unix_s(t)
    if ended is not None:
        return float(ended)
    return t.datetime_complete.timestamp() if t.datetime_complete is not None else math.inf


def standing_answer(study: optuna.Study, since_unix_s: float | None, base_params: Mapping[str, Any],
                    base_accuracy: float | None, contenders: list[Contender],
                    tolerance: float) -> tuple[Answer, str] | None:
    """The study's answer, with the words that say why it stands, when another worker confirmed it while this one
    searched (after `since_unix_s`) and no run since could change it; None: confirm here. A worker that joins
    during or just before another's confirmation is the study's last searching worker once its own trials end: it
    confirmed the same answer again, on the budget of its own short search, far under the confirmation's minimum
    (a 1-trial joiner: 3 rounds, ~35 s, against a budget of 1 s), and stored it in place of the first. It stands
    when it was confirmed (rounds ran) at the same tolerance and your configuration's accuracy, and no run at your
    seed that ended ok since, but the confirmer's own (nightly's top-ups of it), is of a configuration it measured
    or named (the answer, its ties, the fastest it beat, those the budget left out) or of one within noise of the
    fastest now (`contenders`). An answer from before this worker started (an earlier sweep, last night's) is
    confirmed again: the machine may have changed since."""
    stored = study.user_attrs.get(ANSWER_ATTR)
    if since_unix_s is None or not isinstance(stored, dict) or stored.get("confirmed_unix_s") is None:
        return None
    answer = Answer.from_dict(stored)
    if answer.confirmed_unix_s < since_unix_s or answer.rounds_run() < MIN_ROUNDS \
            or not math.isclose(answer.tolerance, tolerance) or answer.baseline_val_accuracy != base_accuracy \
            or not answer.baseline_trials \
            or key(study.get_trials(deepcopy=False)[answer.baseline_trials[0]].params) != key(base_params):
        return None
    named = [answer.params, *answer.tied_with, *(c["params"] for c in answer.not_confirmed),
             *([answer.fastest_contender["params"]] if answer.fastest_contender else []),
             *(c.params for c in contenders)]
    relevant = {key(p) for p in named}
    since = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
             if _ended_unix_s(t) > answer.confirmed_unix_s and outcome(t) == OK
             and SEED_ATTR not in t.user_attrs and t.user_attrs.get(WORKER_ATTR) != answer.confirmed_by]
    if any(key(t.params) in relevant for t in since):
        return None
    at = time.strftime("%H:%M:%S UTC", time.gmtime(answer.confirmed_unix_s))
    stands = (f"confirmed by worker {answer.confirmed_by} at {at}, while this worker searched; it stands without "
              f"new rounds: none of the {len(since)} run(s) that ended since is of a configuration within noise of "
              f"the fastest or one its confirmation measured")
    answer.note = "; ".join(filter(None, [answer.note, stands]))
    answer.standing, answer.confirm_wall_s = True, 0.0
    return answer, stands


def _breaks(rules: list[str], base_params: Mapping[str, Any], base_trials: list[optuna.trial.FrozenTrial],
            found_ok: list[Candidate]) -> str:
    """The rules of hydra.sweeper.constraints that your configuration breaks, with its figures (the median of its
    runs at your seed, as every configuration's), or '' when it meets them (or has no run at your seed)."""
    parsed = parse_constraints(rules)
    at_seed = Candidate(dict(base_params), [t for t in base_trials if SEED_ATTR not in t.user_attrs])
    if not parsed or not at_seed.trials or any(key(c.params) == key(base_params) for c in found_ok):
        return ""
    return broken_text(parsed, at_seed.metrics)


def _next_in_line(ranked: list[Contender], tried: set[tuple], base_throughput: float | None, noise: float,
                  fastest: Ratio) -> Contender | None:
    """When no contender was faster than the baseline beyond noise: the fastest configuration at the floor not
    measured again yet, if the search saw it faster than the baseline by more than noise and than what the
    fastest contender measured in the rounds. Seen in a sweep: one lucky run of `loader.num_workers=2` (2,811
    samples/s in the search, 0.94x in the rounds) set the contenders' window above a configuration the search ran
    at 1.69x, and the answer was the baseline."""
    if base_throughput is None or base_throughput <= 0:
        return None
    return next((c for c in ranked if key(c.params) not in tried
                 and c.throughput / base_throughput > max(1.0 + noise, fastest.estimate)), None)


def throughput_of(study: optuna.Study, params: Mapping[str, Any]) -> float | None:
    """A configuration's throughput: the median of its runs at the study's seed that ended ok, the confirmation's
    rounds among them (the front table's figure). Your configuration's is what a speedup divides by outside the
    paired rounds (a contender left out by the budget, the next in line, confirm_budget=0), the front table's `vs
    base` divisor (search/reports/tables.py baseline_value): every other configuration's figure is the median of
    its runs at that seed, so the baseline's is too; the rounds, measured beside the contenders, are most of its
    runs, and its run at the next seed trains another draw of the same data order, not the one the others are
    compared at."""
    found = _candidate(study, params)
    return found.metrics.get(THROUGHPUT) if found is not None else None


def runs_of(study: optuna.Study, params: Mapping[str, Any]) -> list[int]:
    """The trials of a configuration at the study's seed that ended ok: its search runs, the confirmation's rounds,
    nightly's top-ups."""
    found = _candidate(study, params)
    return [t.number for t in found.trials] if found is not None else []


def _candidate(study: optuna.Study, params: Mapping[str, Any]) -> Candidate | None:
    return next((c for c in candidates(study.get_trials(deepcopy=False)) if key(c.params) == key(params)), None)


def _rounds(study: optuna.Study, run_trials: RunTrials, configs: list[Mapping[str, Any]], round_s: float,
            over_budget: Callable[[float, float], bool], first_round: int = 0, least: int = MIN_ROUNDS,
            number_from: int = 1) -> int:
    """Interleaved rounds of `configs`, from the block's `first_round` (0-based): at least `least`, then more
    while `over_budget(seconds spent, seconds per round)` says no (per round: `round_s`, the estimate, until a
    round ran, then the rounds' measured mean), up to MAX_ROUNDS in the block; returns the
    number of rounds in the block. Each is stored as `search.confirm_round` = number_from + its place in the
    block: one confirmation numbers its rounds 1, 2, ... once (the rounds of a next in line or one instead go
    on from the last), as the terminal says them; the order is reversed every other round of the block."""
    start, rounds = time.monotonic(), first_round
    while rounds < MAX_ROUNDS:
        done = rounds - first_round
        spent = time.monotonic() - start
        per_round = spent / done if done else round_s
        if done >= least and over_budget(spent, per_round):
            break
        for params in (configs if rounds % 2 == 0 else configs[::-1]):
            enqueue(study, dict(params), CONFIRM, **{ROUND_ATTR: number_from + rounds})
        run_trials(len(configs))
        rounds += 1
    return rounds


def _more_if_undecided(study: optuna.Study, run_trials: RunTrials, configs: list[Mapping[str, Any]],
                       round_s: float, rounds: int, undecided_rounds: int, say: Callable[[str], None],
                       fastest: Callable[[], Ratio | None], number_from: int = 1) -> None:
    """`undecided_rounds` (hydra.sweeper.confirm_undecided_rounds) more rounds, once, over the budget, when the
    fastest contender's speedup (``fastest()``, over the `rounds` run) is above 1 by its estimate and its
    interval still holds 1: with 3 rounds Student's t has 2 degrees of freedom (4.30; with 5 rounds, 2.78),
    and a default sweep here answered "your configuration" with a 1.39x contender at 95% CI 0.90-2.14."""
    more = min(undecided_rounds, MAX_ROUNDS - rounds)
    if more <= 0:
        return
    ratio = fastest()
    if ratio is None or ratio.rounds < 2 or ratio.estimate <= 1.0 or not ratio.holds(1.0):
        return
    paired_text = f", {ratio.rounds} of them paired" if ratio.rounds != rounds else ""
    say(f"undecided after {rounds} rounds{paired_text} (the fastest contender: {ratio.text()}): {more} more "
        f"round(s), over the budget, before the answer is read")
    _rounds(study, run_trials, configs, round_s, lambda spent, per_round: True, first_round=rounds, least=more,
            number_from=number_from)


def check_text(check: Mapping[str, Any]) -> str:
    """The seed check in words: the mean of the two seeds, and the second seed's runs."""
    return (f"mean val_accuracy over seeds {check['seed'] - 1} and {check['seed']} {check['mean_val_accuracy']:.4f} "
            f"vs the baseline's {check['baseline_mean_val_accuracy']:.4f} (at seed {check['seed']}: "
            f"{check['val_accuracy']:.4f} vs {check['baseline_val_accuracy']:.4f})")


def minimum_s(base_run_s: float, run_s: list[float], check_s: list[float]) -> float:
    """The least a confirmation costs: 3 rounds, each the baseline's run (`base_run_s`) and each contender's
    (`run_s`), and one check, the dearest of the contenders' (`check_s`): which one is checked is read after the
    rounds."""
    return MIN_ROUNDS * (base_run_s + sum(run_s)) + max(check_s, default=0.0)


def over_budget_note(base_run_s: float, run_s: list[float], check_s: list[float], budget_s: float) -> str:
    """'' when the minimum confirmation fits the budget; else what it will take, why, and the way out."""
    least = minimum_s(base_run_s, run_s, check_s)
    if least <= budget_s:
        return ""
    return (f"; its minimum, {MIN_ROUNDS} rounds and one check, takes ~{least:.0f} s, over the budget (a round "
            f"costs each configuration's own timed run whatever the search's length, so a short search pays a "
            f"larger share; longer trials keep it inside, hydra.sweeper.confirm_budget=0 skips it)")


def within_budget(contenders: list[Contender], base_run_s: float, run_s: list[float], check_s: list[float],
                  budget_s: float) -> list[Contender]:
    """The contenders (fastest first) whose minimum confirmation fits the budget: 3 rounds of them and the
    baseline, and one check (`run_s`, `check_s`: each contender's, in its place); the slowest left out first,
    the fastest kept even over the budget."""
    kept = len(contenders)
    while kept > 1 and minimum_s(base_run_s, run_s[:kept], check_s[:kept]) > budget_s:
        kept -= 1
    return contenders[:kept]


def _accuracy_at(study: optuna.Study, params: Mapping[str, Any], seed: int) -> float | None:
    """The median val_accuracy of the configuration's runs at train.seed `seed` (SEED_ATTR) that ended ok."""
    found = [metrics(t)[ACCURACY] for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
             if t.user_attrs.get(SEED_ATTR) == seed and key(t.params) == key(params)
             and outcome(t) == OK and ACCURACY in metrics(t)]
    return statistics.median(found) if found else None


def your_maths(staging: bool, params: Mapping[str, Any], base_params: Mapping[str, Any]) -> bool:
    """With staging, a configuration that moves only speed-only knobs: its accuracy at any seed is the
    baseline's (search/sweep/staging.py), so its second-seed check trains nothing of its own."""
    return staging and maths_key(params) == maths_key(base_params)


def _seed_check(run: SweepRun, run_trials: RunTrials, params: Mapping[str, Any], base_params: Mapping[str, Any],
                seed: int, at_seed: tuple[float, float]) -> dict[str, Any] | None:
    """Train `params` to the end at seed + 1; compare the mean of its val_accuracy at both seeds with the
    baseline's (`at_seed`: the contender's and the baseline's at the study's seed). Your maths (your_maths):
    the baseline's run at seed + 1 stands for it, as staging's timed runs stand for it at the study's seed (the
    check is then passed by construction, `your_maths` in it)."""
    study, at = run.study, seed + 1
    yours = your_maths(run.staging, params, base_params)
    wanted = [p for p in ((base_params,) if yours else (base_params, params)) if _accuracy_at(study, p, at) is None]
    for p in wanted:
        enqueue(study, dict(p), SEED_CHECK, seed=at)
    run_trials(len(wanted))
    theirs = _accuracy_at(study, base_params, at)
    ours = theirs if yours else _accuracy_at(study, params, at)
    if ours is None or theirs is None:
        return None
    mean, base_mean = (at_seed[0] + ours) / 2, (at_seed[1] + theirs) / 2
    return {"seed": at, "val_accuracy": ours, "baseline_val_accuracy": theirs, "mean_val_accuracy": mean,
            "baseline_mean_val_accuracy": base_mean, "passed": mean >= base_mean - run.settings.accuracy_tolerance,
            **({"your_maths": True} if yours else {})}


def overrides_for(space_fixed: list[str], params: Mapping[str, Any]) -> list[str]:
    """The Hydra overrides that reproduce a configuration of this sweep."""
    return [*space_fixed, *(to_override(k, v) for k, v in params.items())]
