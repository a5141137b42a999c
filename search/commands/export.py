"""`python -m search export`: the configuration chosen by a rule, as a YAML
file of Hydra overrides with the hardware fingerprint it was measured on.

By default it is the sweep's confirmed answer (search/sweep/confirm.py): the
fastest configuration at the baseline's accuracy, with its speedup, and the
contenders within noise of the search's fastest that the confirmation's
budget left out. Without a stored answer (the sweep was stopped before its
confirmation, or still runs), the search's fastest at the sweep's accuracy
floor, said to be unconfirmed; a stored answer with search trials after its
confirmation (a later sweep stopped before its own) says they were not
confirmed. A rule given on the command line chooses instead. The rule is a metric to maximize or minimize and constraints on the others,
e.g. the fastest with `val_accuracy >= 0.97`:

    python -m search export --best throughput_samples_per_s --where 'val_accuracy >= 0.97'

A configuration's figures are medians over its trials (search/reports/choose.py).
The file's `overrides` reproduce it: `python -m search run --from best-<study>.yaml`
(the command is printed, and the same with the overrides spelt out), or any
Hydra app with the same config keys (for a study of the user's own Hydra app,
that app as the sweep was started, with the overrides spelt out). They are
the overrides the sweep launched the trial with, which name the objective
and, for a file-based one, the config search path it was found on (search/sweep/planning.py); the
sweep's own settings (`hydra.*` but the search path) and its per-trial
instructions (early stopping, device slots) are left out.
"""
from __future__ import annotations

import argparse
import difflib
import shlex
import sys
from dataclasses import fields
from pathlib import Path

import optuna
import yaml

from search.commands.report import add_study_arguments, open_study
from search.errors import BadInput, exit_bad_input
from search.measure import fingerprint
from search.record import (ACCURACY, ACCURACY_FROM_ATTR, ANSWER_ATTR, APP_ATTR, CONFIRMATION_ROLES, FIXED_ATTR,
                           NIGHTLY_ROLE_ATTR, ROLE_ATTR, THROUGHPUT, Answer, Contender, metrics, role)
from search.reports.choose import best, candidates, key, measured_ok
from search.sweep.constraints import parse_constraints
from search.sweep.answer import eligible, seed_differences
from search.sweep.baseline import accuracy_floor, baseline_accuracy, baseline_trials, recorded_tolerance
from search.sweep.fixed_config import CONSTRAINTS_KEY
from search.sweep.staging import maths_key
from search.sweep.sweep_settings import SweepSettings
from search.sweep.reproduce import job_overrides, paste_line
from search.sweep.study import OUR_APP, study_metrics


def read_overrides(path: Path) -> list[str]:
    """The `overrides` of an exported file (`python -m search run --from FILE`)."""
    try:
        overrides = yaml.safe_load(path.read_text()).get("overrides")
    except (OSError, yaml.YAMLError, AttributeError) as err:
        raise BadInput(f"--from must name a file written by python -m search export; got {str(path)!r} "
                       f"({type(err).__name__}); fix: python -m search export --out best.yaml") from None
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise BadInput(f"--from must name a file with a list of overrides under 'overrides'; got {str(path)!r}; "
                       f"fix: python -m search export --out best.yaml") from None
    return overrides


def _check_reported(study: optuna.Study, names: list[str], option: str) -> None:
    """Each metric `option` names is one the study's trials report (a typo matched no configuration, and the fix
    said to relax the rule or run more trials)."""
    reported = sorted({k for t in study.get_trials(deepcopy=False) for k in metrics(t)})
    for name in names:
        if reported and name not in reported:
            near = difflib.get_close_matches(name, reported, n=1)
            fix = f"{option} with {near[0]!r}" if near else f"one of {', '.join(reported)}"
            raise BadInput(f"{option} must name a metric the study's trials report; got {name!r}; fix: {fix}")


def choose(study: optuna.Study, metric: str | None, direction: str | None, where: list[str]) -> dict:
    names = study_metrics(study)
    metric = metric or names[0]
    rules = parse_constraints(where)
    _check_reported(study, [metric], "--best")
    _check_reported(study, [r.metric for r in rules], "--where")
    if direction is None and metric not in names:
        raise BadInput(f"--direction is needed for a metric that is not one of the study's metrics {names}; "
                       f"got --best {metric}; fix: --best {metric} --direction minimize (or maximize)")
    direction = direction or study.directions[names.index(metric)].name.lower()
    chosen = best(candidates(study.get_trials(deepcopy=False)), metric, direction == "maximize", rules)
    rule = f"{direction} {metric}" + (f" where {' and '.join(map(str, rules))}" if rules else "")
    if chosen is None:
        raise BadInput(f"the export rule must match a configuration that ran ok and is feasible; got '{rule}' on "
                       f"study {study.study_name!r}, which has none that does; fix: relax --where or run more trials")
    newest = max(chosen.trials, key=lambda t: t.number)
    return {
        "study": study.study_name,
        "rule": f"{rule} (medians over each configuration's trials)",
        "trials": [t.number for t in chosen.trials],
        "metrics": _figures(chosen.metrics),
        **_accuracy_note(chosen.trials),
        "overrides": job_overrides(newest),
        "fingerprint": fingerprint.from_tags(study.user_attrs),
    }


RESUME = "fix: run the sweep again to confirm (python -m search multirun with the same overrides resumes the study)"


def unconfirmed(study: optuna.Study) -> dict | None:
    """For a study whose sweep has a baseline but no stored answer (its sweep was stopped before its confirmation
    stored one, or still runs): the fastest configuration by the sweep's own rule (search/sweep/answer.py
    `eligible`: at or above the baseline's val_accuracy minus the tolerance, or with your model's maths), not
    re-measured, and a note that says so. None for a study without a baseline run that ended ok (a sweep with
    baseline_repeats=0, or one that does not optimise throughput, ends with the front only: no answer to miss)."""
    base = [t for t in baseline_trials(study) if measured_ok(t)]
    if not base or THROUGHPUT not in study_metrics(study):
        return None
    swept_at = recorded_tolerance(study)  # None: a study from before the sweep recorded it
    tolerance = swept_at if swept_at is not None else \
        float(next(f.default for f in fields(SweepSettings) if f.name == "accuracy_tolerance"))
    whose = "the sweep's" if swept_at is not None else "the default"
    floor = accuracy_floor(study, tolerance)
    recorded = study.user_attrs.get(FIXED_ATTR) or {}
    guarded = floor is not None or CONSTRAINTS_KEY in recorded  # the trials met your constraints (candidates)
    base_maths = maths_key(base[0].params)
    found = [c for c in candidates(study.get_trials(deepcopy=False)) if THROUGHPUT in c.metrics]
    by_key = {key(c.params): c for c in found}
    ranked = eligible([Contender(dict(c.params), c.metrics[THROUGHPUT], c.metrics.get(ACCURACY),
                                 your_maths=maths_key(c.params) == base_maths) for c in found], floor, guarded)
    if floor is not None:
        held = (f"at the sweep's floor val_accuracy >= {floor:.4f} (your configuration's "
                f"{baseline_accuracy(study):.4f} minus {whose} "
                f"hydra.sweeper.accuracy_tolerance {tolerance:g})")
    elif guarded:
        held = "within hydra.sweeper.constraints (no val_accuracy measured)"
    else:
        held = "with your model's maths (no val_accuracy measured, no hydra.sweeper.constraints to hold)"
    rule = f"not confirmed: the search's fastest {held}"
    if not ranked:
        raise BadInput(f"the export must match a configuration at the sweep's accuracy when the study has no "
                       f"confirmed answer; got none {held} on study {study.study_name!r}; {RESUME}")
    chosen = by_key[key(ranked[0].params)]
    note = (f"study {study.study_name!r} has no confirmed answer (its sweep did not finish its confirmation: "
            f"interrupted, or still running); exported instead the search's fastest {held}, trials "
            f"{[t.number for t in chosen.trials]}, not re-measured against your configuration; {RESUME}")
    return {
        "study": study.study_name,
        "rule": f"{rule}; medians over each configuration's trials",
        "note": note,
        "trials": [t.number for t in chosen.trials],
        "metrics": _figures(chosen.metrics),
        **_accuracy_note(chosen.trials),
        "overrides": job_overrides(max(chosen.trials, key=lambda t: t.number)),
        "fingerprint": fingerprint.from_tags(study.user_attrs),
    }


def later_trials(study: optuna.Study, answer: Answer) -> tuple[int, list[optuna.trial.FrozenTrial]]:
    """The search trials that ended ok after the stored answer's confirmation (a later sweep of the study, stopped
    before its own confirmation, or still running): not measured against the answer. The confirmation ends with
    the last run of the answer at the study's seed (a round) and the confirmation's and nightly's runs right after
    it; an answer whose confirmation ran no trials (no contender, confirm_budget=0) has no such end: none then.
    The confirmation's last trial, and those trials."""
    trials = study.get_trials(deepcopy=False)
    if not answer.trials or not (answer.rounds_run() or answer.seed_check):
        return -1, []
    end = max(answer.trials)
    while end + 1 < len(trials) and (role(trials[end + 1]) in CONFIRMATION_ROLES
                                     or NIGHTLY_ROLE_ATTR in trials[end + 1].user_attrs):
        end += 1
    return end, [t for t in trials[end + 1:] if ROLE_ATTR not in t.user_attrs and measured_ok(t)]


def from_answer(study: optuna.Study) -> dict | None:
    """The sweep's confirmed answer (search/sweep/confirm.py), or None when the study has none."""
    stored = study.user_attrs.get(ANSWER_ATTR)
    if not stored:
        return None
    answer = Answer.from_dict(stored)
    chosen = next((c for c in candidates(study.get_trials(deepcopy=False)) if key(c.params) == key(answer.params)),
                  None)  # its trials at the study's own seed: a second-seed check trains at another train.seed
    if chosen is None:
        return None
    same = chosen.trials
    if answer.is_baseline:  # without rounds nothing came close enough to be measured again: its note says why
        why = "nothing was faster beyond noise" if answer.rounds_run() else answer.note
        what = f"your own configuration ({why})" if why else "your own configuration"
    else:
        what = f"{answer.speedup:.2f}x the baseline (95% CI {answer.ci_low:.2f}-{answer.ci_high:.2f})"
    return {
        "study": study.study_name,
        "rule": f"the sweep's confirmed answer: {what}, " + (
            f"val_accuracy at least the baseline's minus {answer.tolerance:g}" if answer.baseline_val_accuracy
            is not None else "no val_accuracy measured: within hydra.sweeper.constraints, or moving only knobs "
                             "that keep your model's maths") + (
            f"; your configuration breaks hydra.sweeper.constraints ({answer.baseline_breaks}), this one meets them"
            if answer.baseline_breaks else ""),
        "trials": [t.number for t in same],
        "speedup_vs_baseline": _speedup(answer.speedup, answer.ci_low, answer.ci_high, answer.rounds)
        if not answer.is_baseline else {"estimate": 1.0},
        "confirm_rounds": answer.rounds_run(),
        **({"note": answer.note} if answer.note else {}),
        **({"seed_check": _seed_check(answer.seed_check, answer.tolerance)} if answer.seed_check else {}),
        **({"fastest_contender": {"overrides": fastest["overrides"], "speedup_vs_baseline": _speedup(
            fastest["speedup"], fastest["ci_low"], fastest["ci_high"], fastest["rounds"])}}
           if answer.is_baseline and (fastest := answer.fastest_contender) else {}),
        "metrics": _figures(chosen.metrics),
        **_accuracy_note(same),
        "overrides": job_overrides(max(same, key=lambda t: t.number)),
        "fingerprint": fingerprint.from_tags(study.user_attrs),
        **({"not_confirmed": left_out} if (left_out := _not_confirmed(study, answer)) else {}),
        **({"later_trials": _later_note(study, *later)} if (later := later_trials(study, answer))[1] else {}),
    }


def _later_note(study: optuna.Study, end: int, later: list[optuna.trial.FrozenTrial]) -> dict:
    """The trials a later sweep ran after the answer's confirmation, and the line that says the answer predates them."""
    speeds = [metrics(t)[THROUGHPUT] for t in later if THROUGHPUT in metrics(t)]
    fastest = f", up to {max(speeds):,.0f} samples/s," if speeds else ""
    numbers = [t.number for t in later]
    shown = f"trials {numbers[0]} to {numbers[-1]}" if len(numbers) > 1 else f"trial {numbers[0]}"
    return {"trials": numbers,
            "note": f"the confirmed answer is from an earlier sweep (its confirmation ended at trial {end}); "
                    f"{len(later)} later trial(s) ({shown}{fastest} on study {study.study_name!r}) were not "
                    f"confirmed (the sweep that ran them was interrupted before its confirmation, or still runs); "
                    f"{RESUME}"}


def _figures(metrics: dict) -> dict:
    """The configuration's medians, less the clock readings (`*_unix_s`: when a run was timed, no figure of it)."""
    return {k: float(v) for k, v in metrics.items() if not k.endswith("_unix_s")}


def _speedup(estimate: float, low: float | None, high: float | None, rounds: int) -> dict:
    """A speedup over the baseline as the export writes every one: the answer's and the fastest contender's."""
    return {"estimate": estimate, "ci95": [low, high], "rounds": rounds}


def _seed_check(check: dict, tolerance: float) -> dict:
    """The second-seed check the answer rests on (search/sweep/confirm.py): val_accuracy's mean over the two seeds,
    the answer's against the baseline's at the tolerance, and the second seed's runs."""
    out = {"seeds": [check["seed"] - 1, check["seed"]], "passed": bool(check["passed"]), "tolerance": tolerance}
    if "mean_val_accuracy" in check:  # an answer stored before the check took both seeds has the second only
        out.update(mean_val_accuracy=check["mean_val_accuracy"],
                   baseline_mean_val_accuracy=check["baseline_mean_val_accuracy"],
                   # the answer's less yours at each seed: how far they differ is the check's own noise
                   val_accuracy_difference_at_seeds=list(seed_differences(check)))
    out[f"at_seed_{check['seed']}"] = {"val_accuracy": check["val_accuracy"],
                                       "baseline_val_accuracy": check["baseline_val_accuracy"]}
    if check.get("your_maths"):  # your maths: your runs stand for the answer at both seeds, nothing trained again
        out["from_baseline"] = True
    return out


def _accuracy_note(trials: list[optuna.trial.FrozenTrial]) -> dict:
    """For a configuration only timed (staging: search/sweep/staging.py), where its accuracy comes from: the
    trials that trained its maths. `run` trains it whole, the same maths, but not always bit for bit (another
    thread count adds floats in another order), so its val_accuracy can differ from the figure written here."""
    if not trials or any(ACCURACY_FROM_ATTR not in t.user_attrs for t in trials):
        return {}  # it trained whole at least once: its accuracy is its own
    sources = sorted({int(t.user_attrs[ACCURACY_FROM_ATTR]) for t in trials})
    return {"val_accuracy_from": f"trial(s) {', '.join(map(str, sources))}, which trained its maths: this "
                                 f"configuration was timed only (speed-only knobs moved), so a whole run of it "
                                 f"draws that accuracy again"}


def _not_confirmed(study: optuna.Study, answer: Answer) -> list[dict]:
    """The contenders within noise of the search's fastest that the confirmation's budget left out, as overrides to run
    (`python -m search run ...`) with their speedup in the search: not shown slower, only not measured again."""
    trials = study.get_trials(deepcopy=False)
    return [{"overrides": job_overrides(trials[c["trials"][0]]), "search_speedup_vs_baseline": c.get("search_speedup")}
            for c in answer.not_confirmed if c.get("trials") and c["trials"][0] < len(trials)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m search export", description=__doc__.split("\n\n")[0])
    add_study_arguments(parser)
    parser.add_argument("--best", default=None, help="metric to optimise (default: the sweep's confirmed answer, "
                                                     "else the study's first metric)")
    parser.add_argument("--direction", choices=("maximize", "minimize"), default=None,
                        help="default: the study's direction for that metric (needed for other metrics)")
    parser.add_argument("--where", action="append", default=[], help="a constraint, e.g. 'val_accuracy >= 0.97'")
    parser.add_argument("--out", type=Path, default=None, help="YAML file (default best-<study>.yaml)")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = open_study(args.storage, args.study_name)
        rule_given = args.best is not None or args.where
        answer = from_answer(study)
        chosen = (None if rule_given else answer or unconfirmed(study)) or choose(study, args.best, args.direction,
                                                                                   args.where)
    except BadInput as err:
        exit_bad_input(err)
    if answer is not None and chosen["trials"] != answer["trials"]:  # your rule chose another than the answer
        chosen["confirmed_answer"] = {k: answer[k] for k in ("rule", "overrides", "speedup_vs_baseline")}
    out = args.out or Path(f"best-{study.study_name}.yaml")
    app = study.user_attrs.get(APP_ATTR, OUR_APP)  # studies written before it was recorded ran ours
    spelt_out = f"{app} " + paste_line(chosen["overrides"])
    if app == OUR_APP:
        header = (f"# Written by `python -m search export`. Reproduce: {OUR_APP} --from {shlex.quote(str(out))}"
                  f"\n# (or {OUR_APP} <the overrides below>)\n")
        lines = [f"{OUR_APP} --from {shlex.quote(str(out))}", spelt_out]
    else:  # the user's own app: Hydra takes the overrides, not --from
        header = f"# Written by `python -m search export`. Reproduce: {app} <the overrides below>\n"
        lines = [spelt_out]
    out.write_text(header + yaml.safe_dump(chosen, sort_keys=False))
    print(f"exported {chosen['rule']}: trials {chosen['trials']} to {out}")
    if "confirmed_answer" in chosen:
        print(f"note: the sweep's confirmed answer is another configuration ({chosen['confirmed_answer']['rule']}); "
              f"{out} names it under confirmed_answer")
    if chosen is not answer and not rule_given and "note" in chosen:  # no confirmed answer: what was instead
        print(f"note: {chosen['note']}")
    if chosen is answer and "later_trials" in chosen:
        print(f"note: {chosen['later_trials']['note']}")
    for line in lines:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
