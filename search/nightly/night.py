"""`python -m search nightly`: one study per night, compared with earlier nights.

Before the search: the confirmed answer of the last night on the same
hardware (search/sweep/confirm.py; its best configuration when it has none)
is the incumbent, enqueued `repeats` times, so it is measured
again under tonight's software, and the best other configurations of
earlier nights (`warm_start`) once each; the sampler then proposes
`n_trials` new ones, and the answer is confirmed. After it: tonight's
answer is trained until it has `repeats` whole runs tonight, so tomorrow
has repeats to compare against.
Then the incumbent's repeats are tested against its measurements of that
earlier night (search/nightly/regression.py) and the report is written
(search/nightly/morning_report.py).

A regression stands until a night recovers from it: the night that found it
records the configuration and the night it was faster on (STANDING), and
each later night measures that configuration again (`repeats` times, unless
it is the incumbent) and tests it against that night's runs, the verdict
`regression` again while it is slower. Without this, the night after a
regression compared last night's slow answer with itself and said fine.
`hydra.sweeper.nightly.accept_slowdown=true` for one night accepts a
slowdown that stands (an intended change): that night neither tests nor
carries it.

Nights belong together by `hydra.sweeper.nightly.series`, stored as a study
attribute, and are ordered by the time they started; hardware means the
fingerprint's GPU and CPU fields (not the host name, so identical machines
compare), and software changes are what the report explains.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import TrialState

from search.measure import fingerprint
from search.record import (ACCURACY_FROM_ATTR, ANSWER_ATTR, BASELINE, NIGHTLY_INCUMBENT, NIGHTLY_ROLE_ATTR,
                           NIGHTLY_STANDING, NIGHTLY_TOP_UP, NIGHTLY_WARM_START, ROLE_ATTR)
from search.tracking.mlflow_client import log_report
from search.tracking.redact import redact
from search.sweep.roles import enqueued_params
from search.reports.choose import Candidate, best, candidates, key, ranked
from search.errors import EXIT_NIGHTLY_FAILED, EXIT_REGRESSION
from search.nightly import conditions
from search.nightly.regression import compare

SERIES = "search.nightly.series"
STARTED = "search.nightly.started_at"
VERDICT = "search.nightly.verdict"
REGRESSION = "search.nightly.regression"  # true | false (superseded, as the verdict)
SUPERSEDED = "superseded"  # the verdict of an earlier report of the same night (a night run again)
SUPERSEDED_BY = "search.nightly.superseded_by"
SUPERSEDED_VERDICT = "search.nightly.superseded_verdict"
ENDED_WITHOUT_REPORT = ("KILLED", "FAILED")  # MLflow statuses of a parent run whose night never reported
# On a night whose regression stands (or whose test of it could not run): {"params": the configuration, "night":
# the last night it was fast on, "since": the first night it was slow on}. The next night tests it again.
STANDING = "search.nightly.standing_regression"
REGRESSED_SINCE = "search.nightly.regressed_since"  # an MLflow tag of a night whose verdict is a standing regression
HARDWARE_KEYS = ("gpu_name", "gpu_count", "cpu_model", "cpu_count")


@dataclass
class Night:
    cfg: Mapping[str, Any]
    study: optuna.Study
    earlier: list[optuna.Study] = field(default_factory=list)  # same series, newest first
    incumbent: Candidate | None = None  # last night's best on this hardware
    incumbent_night: str | None = None
    standing: Candidate | None = None  # a regression that stands: the configuration's runs on the last fast night
    standing_night: str | None = None  # that night
    standing_since: str | None = None  # the first night it was slow on
    accepted: dict | None = None  # a standing regression tonight accepts (hydra.sweeper.nightly.accept_slowdown)
    enqueued: int = 0  # by this start
    on_top: int = 0  # waiting to run on top of n_trials: tonight's repeats and warm starts (a resumed night's too)
    first_trial: int = 0  # the study's trials before this run: a resumed night's are its earlier run's


def hardware(study: optuna.Study) -> dict[str, str]:
    fp = fingerprint.from_tags(study.user_attrs)
    return {k: fp.get(k, "") for k in HARDWARE_KEYS}


def _earlier_nights(storage: Any, series: str, tonight: str, tonight_started: str) -> list[optuna.Study]:
    """The nights of the series that started before tonight's study did, newest first. A night re-run after a
    later one (an operator finishing a killed 11-08 once 11-09 exists) compares with the nights before it, never
    with the later one: its incumbent, regression test, best ever and warm starts all come from these."""
    before = _started(tonight_started)
    found = [s for s in storage.get_all_studies()
             if s.user_attrs.get(SERIES) == series and s.study_name != tonight and STARTED in s.user_attrs
             and _started(s.user_attrs[STARTED]) < before]
    found.sort(key=lambda s: _started(s.user_attrs[STARTED]), reverse=True)
    return [optuna.load_study(study_name=s.study_name, storage=storage) for s in found]


def _started(stamp: str) -> datetime:
    """When a night started, as a moment: the attribute is local time with its UTC offset, and as text nights
    started under two offsets (a DST change, another machine's zone) sort wrongly."""
    try:
        return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:  # not written by this module: after every night that was
        return datetime.min.replace(tzinfo=timezone.utc)


def _fits(params: Mapping[str, Any], distributions: Mapping[str, BaseDistribution]) -> bool:
    """Every knob value is in tonight's space (a knob the space gained is sampled)."""
    for name, value in params.items():
        dist = distributions.get(name)
        try:
            if dist is None or not dist._contains(dist.to_internal_repr(value)):
                return False
        except (ValueError, TypeError):
            return False
    return True


def _enqueue(study: optuna.Study, params: Mapping[str, Any], role: str, times: int) -> int:
    """Enqueue `params` for `role` until the study holds `times` such trials that ran ok, run or wait to run; how
    many were enqueued. A resumed night, or a second worker, does not enqueue them again."""
    kept = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING)
    have = sum(1 for t in study.get_trials(deepcopy=False, states=kept)
               if t.user_attrs.get(NIGHTLY_ROLE_ATTR) == role
               and key(t.params or enqueued_params(study, t)) == key(params))
    for _ in range(times - have):
        study.enqueue_trial(dict(params), user_attrs={NIGHTLY_ROLE_ATTR: role}, skip_if_exists=False)
    return max(0, times - have)


def start(cfg: Mapping[str, Any], study: optuna.Study, storage: Any,
          distributions: Mapping[str, BaseDistribution], first: bool = True) -> Night:
    """Tag tonight's study and enqueue the incumbent's repeats and the warm-start configurations (`first`: this
    worker is the study's first, search/sweep/workers.py; another one's start enqueues nothing)."""
    study.set_user_attr(SERIES, cfg["series"])
    if STARTED not in study.user_attrs:  # a resumed night keeps its place in the series
        study.set_user_attr(STARTED, time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    night = Night(cfg, study, _earlier_nights(storage, cfg["series"], study.study_name,
                                              study.user_attrs[STARTED]), first_trial=len(study.trials))
    metric, here = cfg["metric"], hardware(study)
    for past in night.earlier:
        if hardware(past) == here and (found := night_result(past, metric)):
            night.incumbent, night.incumbent_night = found, past.study_name
            break
    if first and night.incumbent is not None and _fits(night.incumbent.params, distributions):
        night.enqueued += _enqueue(study, night.incumbent.params, NIGHTLY_INCUMBENT, int(cfg["repeats"]))
    _standing(night, here)
    if first and night.standing is not None and _fits(night.standing.params, distributions) and (
            night.incumbent is None or key(night.standing.params) != key(night.incumbent.params)):
        night.enqueued += _enqueue(study, night.standing.params, NIGHTLY_STANDING, int(cfg["repeats"]))
    pool: dict[tuple, Candidate] = {}
    for past in night.earlier:
        for cand in candidates(past.get_trials(deepcopy=False)):
            if metric in cand.metrics and (key(cand.params) not in pool
                                           or cand.metrics[metric] > pool[key(cand.params)].metrics[metric]):
                pool[key(cand.params)] = cand
    skip = {key(c.params) for c in (night.incumbent, night.standing) if c is not None}  # measured again already
    warm = [c for c in ranked(list(pool.values()), metric)
            if key(c.params) not in skip and _fits(c.params, distributions)][:int(cfg["warm_start"])]
    warm_enqueued = sum(_enqueue(study, cand.params, NIGHTLY_WARM_START, 1) for cand in warm) if first else 0
    repeats = f"{night.enqueued} run(s) of it, " if night.incumbent else ""
    said = (f"{repeats}{warm_enqueued} warm-start configuration(s) enqueued" if first
            else "what it reruns enqueued by the study's first worker")
    night.enqueued += warm_enqueued
    inc = f"incumbent from {night.incumbent_night}" if night.incumbent else "no earlier night"
    if night.standing is not None:
        inc += (f"; a regression stands since {night.standing_since} ({_knobs(night.standing.params)} slower than on "
                f"{night.standing_night}): measured again")
    elif night.accepted:
        inc += (f"; the regression since {night.accepted['since']} is accepted "
                f"(hydra.sweeper.nightly.accept_slowdown=true): not tested from tonight")
    print(f"nightly: {len(night.earlier)} earlier nights in series {cfg['series']!r}; {inc}; {said}", flush=True)
    if first:  # a resumed night's leftovers count too: they ran in place of the night's new trials
        night.on_top = sum(1 for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
                           if t.user_attrs.get(NIGHTLY_ROLE_ATTR) in (NIGHTLY_INCUMBENT, NIGHTLY_STANDING,
                                                                      NIGHTLY_WARM_START))
    return night


def _knobs(params: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()))


def _standing(night: Night, here: dict[str, str]) -> None:
    """The regression that stands from the last reported night on this hardware (STANDING), with the runs of its
    configuration on the night it was fast on; none when that night recovered or accepted it."""
    last = next((past for past in night.earlier if hardware(past) == here and VERDICT in past.user_attrs), None)
    held = last.user_attrs.get(STANDING) if last is not None else None
    if not held:
        return
    if night.cfg.get("accept_slowdown"):
        night.accepted = held
        return
    fast = next((past for past in night.earlier if past.study_name == held["night"]), None)
    runs = _whole_runs(fast, held["params"]) if fast is not None else None
    if runs is not None and night.cfg["metric"] in runs.metrics:
        night.standing, night.standing_night, night.standing_since = runs, held["night"], held["since"]


def _whole_runs(study: optuna.Study, params: Mapping[str, Any]) -> Candidate | None:
    """The whole runs of `params` in `study`, as one candidate (the incumbent's, a standing regression's)."""
    return next((c for c in candidates(_whole(study.get_trials(deepcopy=False))) if key(c.params) == key(params)),
                None)


def _whole(trials: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """The trials that trained the whole budget, as the incumbent's repeats and the top-ups do: a throughput-only
    run (a confirmation round, a staged proposal; search/sweep/staging.py) times fewer steps."""
    return [t for t in trials if ACCURACY_FROM_ATTR not in t.user_attrs]


def night_result(study: optuna.Study, metric: str) -> Candidate | None:
    """What a night found: its confirmed answer (search/sweep/confirm.py), or, for a night without one (no
    baseline), its best configuration by `metric`. The next night re-measures it as its incumbent, tonight's
    top-up repeats it, and the morning report calls it tonight's best. Its whole runs when it has some."""
    trials = study.get_trials(deepcopy=False)
    answer = study.user_attrs.get(ANSWER_ATTR)
    if answer:
        for pool in (_whole(trials), trials):
            chosen = next((c for c in candidates(pool) if key(c.params) == key(answer["params"])
                           and metric in c.metrics), None)
            if chosen is not None:
                return chosen
    if any(t.user_attrs.get(ROLE_ATTR) == BASELINE for t in trials):
        # It searched for an answer and has none (killed before its confirmation, or your configuration never ran
        # ok): its fastest trial may have half the accuracy (seen: batch_size=256 at 0.43 against 0.83), so it is
        # nobody's incumbent or best ever.
        return None
    return best(candidates(trials), metric)


def _stands(night: Night, summary: Any) -> dict | None:
    """What tonight hands the next night to test again (STANDING): the regression that stood before tonight unless
    tonight measured it recovered (untested, it still stands), else the one tonight found (the incumbent slower than
    on its night), else none."""
    if summary.standing_verdict is not None and (summary.standing_verdict.regressed
                                                 or not summary.standing_verdict.tested):
        return {"params": dict(night.standing.params), "night": night.standing_night, "since": night.standing_since}
    if summary.verdict is not None and summary.verdict.regressed:
        return {"params": dict(night.incumbent.params), "night": night.incumbent_night,
                "since": night.study.study_name}
    return None


def night_metrics(summary: Any) -> dict[str, float]:
    """Numbers of the night on its MLflow parent run, to chart nights side by side (the trial runs hold the rest):
    tonight's result's median `metric`, and the incumbent's test, its median change (a fraction, -0.05: 5% slower)
    and p-value. Non-finite ones (no test) are left out by the logger."""
    metric, out = summary.metric, {}
    if summary.tonight is not None and metric in summary.tonight.metrics:
        out[f"nightly_result_{metric}"] = summary.tonight.metrics[metric]
    if summary.verdict is not None:
        out.update(nightly_incumbent_change_fraction=summary.verdict.change,
                   nightly_incumbent_p_value=summary.verdict.p_value)
    if summary.standing_verdict is not None:  # against the last night it was fast on
        out.update(nightly_standing_change_fraction=summary.standing_verdict.change,
                   nightly_standing_p_value=summary.standing_verdict.p_value)
    return out


def run_tags(night: Night) -> dict[str, str]:
    """Tags of the nightly's MLflow parent run, for filtering (`tags.search.nightly = 'true'`)."""
    return {"search.nightly": "true", SERIES: str(night.cfg["series"]),
            "search.nightly.incumbent_from": night.incumbent_night or "none"}


def _superseded_verdict(run: Any) -> str | None:
    """What an earlier parent run of the same night said, to keep aside when it is superseded: its verdict, or,
    for a run that ended without a report (killed, or failed before it), `none (KILLED)`. None: leave it alone
    (superseded already, or still running: another worker of the night, or one on another host)."""
    verdict = run.data.tags.get(VERDICT)
    if verdict is not None:
        return None if verdict == SUPERSEDED else verdict
    return f"none ({run.info.status})" if run.info.status in ENDED_WITHOUT_REPORT else None


def supersede_earlier_reports(study_name: str, parent_run_id: str) -> str | None:
    """A night run again (resumed after it was killed, or re-run by hand) reports again, on a new parent run: the
    same night's earlier parent runs that carry a verdict, or that ended without one (killed, failed), get verdict
    (and regression tag) `superseded` (what they said kept in SUPERSEDED_VERDICT, the run that replaced them in
    SUPERSEDED_BY), so that filtering nights by `search.nightly` lists each night once, with a verdict. None, or
    why it could not (MLflow down)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    nights = "tags.`search.role` = 'sweep' and tags.`search.nightly` = 'true'"
    if "'" not in study_name:  # MLflow's filter has no escape for a quote: the name is then compared below only
        nights += f" and tags.`search.study_name` = '{study_name}'"
    try:
        experiment_id = client.get_run(parent_run_id).info.experiment_id
        runs = client.search_runs([experiment_id], nights, max_results=50000)
        for run in runs:
            said = _superseded_verdict(run)
            if run.info.run_id != parent_run_id and run.data.tags.get("search.study_name") == study_name and said:
                client.set_tag(run.info.run_id, SUPERSEDED_VERDICT, said)
                client.set_tag(run.info.run_id, SUPERSEDED_BY, parent_run_id)
                client.set_tag(run.info.run_id, VERDICT, SUPERSEDED)
                client.set_tag(run.info.run_id, REGRESSION, SUPERSEDED)
    except Exception as err:  # noqa: BLE001 - MLflow down: tonight's report stands, the earlier one keeps its tag
        return f"{type(err).__name__}: {redact(' '.join(str(err).split())[:160])}"
    return None


def top_up(night: Night) -> int:
    """After the confirmation: enqueue whole runs of tonight's result (night_result: its answer) until it has
    `repeats` of them, so that tomorrow compares its repeats of the incumbent with repeats."""
    tonight = night_result(night.study, night.cfg["metric"])
    if tonight is None:
        return 0
    have = len(_whole(tonight.trials))
    return _enqueue(night.study, tonight.params, NIGHTLY_TOP_UP, max(0, int(night.cfg["repeats"]) - have))


def finish(night: Night, metric_names: list[str], out_dir: Path, parent_run_id: str | None,
           plot_files: list[Path]) -> int:
    """Test the incumbent, write and log the report; the exit status."""
    from search.nightly.morning_report import Summary, write

    metric, cfg = night.cfg["metric"], night.cfg
    summary = Summary(night.study.study_name, metric, night_result(night.study, metric), metric_names)
    if night.incumbent is not None:  # its repeats tonight against that night's, whole runs both
        now = _whole_runs(night.study, night.incumbent.params)
        summary.incumbent = night.incumbent
        summary.incumbent_night = night.incumbent_night
        summary.verdict = compare(now.values(metric) if now else [], night.incumbent.values(metric),
                                  float(cfg["alpha"]), float(cfg["min_drop"]))
        summary.incumbent_tonight = now
        summary.incumbent_runs_this_run = sum(t.number >= night.first_trial for t in now.trials) if now else 0
        summary.differences = conditions.differences(night.incumbent, now) if now else []
    here = hardware(night.study)
    if night.earlier:  # what changed since the night before, whatever it found
        previous = night.earlier[0]
        summary.previous_night = previous.study_name
        summary.changes = fingerprint.diff(fingerprint.from_tags(previous.user_attrs),
                                           fingerprint.from_tags(night.study.user_attrs), ignore_host=False)
    # "versus last night's best": the latest night on this hardware with a result, which start() took as incumbent
    summary.last_best, summary.last_night = night.incumbent, night.incumbent_night
    for past in night.earlier:  # on this hardware, nights with a result (a killed one has none)
        found = night_result(past, metric) if hardware(past) == here else None
        if found and (summary.best_ever is None or found.metrics[metric] > summary.best_ever.metrics[metric]):
            summary.best_ever, summary.best_ever_night = found, past.study_name
    if night.standing is not None:  # its runs tonight against the last night it was fast on
        now = _whole_runs(night.study, night.standing.params)
        summary.standing, summary.standing_night, summary.standing_since = (
            night.standing, night.standing_night, night.standing_since)
        summary.standing_tonight = now
        summary.standing_verdict = compare(now.values(metric) if now else [], night.standing.values(metric),
                                           float(cfg["alpha"]), float(cfg["min_drop"]))
    summary.accepted = night.accepted
    # Not tested though there was something to test (its repeats failed, or left the space): not a fine night.
    untested = any(v is not None and not v.tested for v in (summary.verdict, summary.standing_verdict))
    status = ("failed" if summary.tonight is None else "regression" if summary.regressed
              else "untested" if untested else "ok")
    night.study.set_user_attr(VERDICT, status)
    standing = _stands(night, summary)
    if standing or STANDING in night.study.user_attrs:  # a night run again may have recovered since
        night.study.set_user_attr(STANDING, standing)
    files = write(summary, status, out_dir, plot_files)
    print(f"nightly: {status}; report: {files[0].absolute()} and {files[1].absolute()}", flush=True)
    moved_tags, condition_metrics = conditions.run_figures(summary.differences)
    since = {REGRESSED_SINCE: standing["since"]} if standing and summary.regressed else {}
    problem = log_report(parent_run_id, files, tags={
        **run_tags(night), VERDICT: status, REGRESSION: str(status == "regression").lower(), **moved_tags, **since},
        metrics={**night_metrics(summary), **condition_metrics})
    if problem:
        print(f"warning: the nightly report is not in MLflow ({problem}); it is on disk", flush=True)
    elif problem := supersede_earlier_reports(night.study.study_name, parent_run_id):
        print(f"warning: an earlier report of this night still carries its verdict in MLflow ({problem}): "
              f"filtering nights by verdict counts this one twice", flush=True)
    return {"ok": 0, "regression": EXIT_REGRESSION}.get(status, EXIT_NIGHTLY_FAILED)  # failed, untested: 5
