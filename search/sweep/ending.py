"""The end of a sweep's search: which worker confirms, and the policies that run after the search.

The study's last worker to finish searching (search/sweep/workers.py)
calls the engine's `finish` (search/sweep/engine.py), and with it these
policies, in order: `Confirmation` measures the answer's contenders and your
configuration again, interleaved, and stores the answer
(search/sweep/confirm.py); `TopUp` runs the hooks' last trials (nightly:
whole runs of tonight's answer). Either may enqueue and run trials of its
own: what the search left waiting is set aside meanwhile and put back after
(search/sweep/roles.py), so the next sweep on the study runs it first.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from omegaconf import OmegaConf

from search.record import ANSWER_ATTR, CONFIRMATION_ROLES, Answer, role
from search.reports.answer import tag_sweep_run
from search.sweep import workers
from search.sweep.answer import no_idle
from search.sweep.confirm import confirm, overrides_for, runs_of
from search.sweep.engine import Engine, Policy
from search.sweep.hooks import SweepHooks
from search.sweep.recovery import worker_id
from search.sweep.roles import put_back, set_aside_waiting

if TYPE_CHECKING:
    from search.sweep.trial_loop import SweepRun


def say_above(run: SweepRun) -> Callable[[str], None]:
    """A line above the progress display, printed as it is: it holds overrides and values (a
    ``hydra.searchpath=[file://...]``) that rich would read as markup and swallow."""
    return lambda line: run.progress.console.print(line, markup=False, highlight=False)


def store(run: SweepRun, answer: Answer) -> None:
    """The answer, with every run of its configuration at the study's seed, on the study and MLflow's sweep run;
    another worker's answer that stands (confirm.standing_answer) on this worker's sweep run only: the study
    keeps it as its confirmer stored it."""
    answer.trials = runs_of(run.study, answer.params)
    if not answer.standing:
        run.study.set_user_attr(ANSWER_ATTR, answer.to_dict())
    tag_sweep_run(run.sweep.parent_run_id, answer)


class Confirmation(Policy):
    """The answer confirmed against your configuration (`baseline`: its values and seed), stored in `answer`."""

    def __init__(self, run: SweepRun, baseline: tuple[dict[str, Any], int | None]):
        self.run, self.baseline = run, baseline
        self.answer: Answer | None = None

    def finish(self, engine: Engine, run_enqueued: Callable[[int], None]) -> None:
        run, (params, seed) = self.run, self.baseline
        plan = run.plan
        aside = set_aside_waiting(run.study)  # proposals the search did not reach: not run as its rounds

        def run_more(count: int) -> None:
            # a trial enqueued since (a killed trial's retry, by recover() here or by a worker that joined) would
            # run in place of a round: only the confirmation's own trials wait while it runs
            aside.extend(set_aside_waiting(run.study, keep=lambda t: role(t) in CONFIRMATION_ROLES))
            run_enqueued(count)

        try:
            answer = confirm(run, run_more, params, seed, lambda p: overrides_for(plan.space.fixed_overrides, p),
                             say_above(run), plan.space.unused or no_idle,
                             OmegaConf.select(run.jobs.config, "train"), workers.registered_unix_s(run.study))
        finally:
            put_back(run.study, aside)
        if answer is not None and not answer.standing:
            answer.confirmed_unix_s, answer.confirmed_by = time.time(), worker_id()
        if answer is not None:
            answer.search_ended = run.search_ended
            store(run, answer)
        self.answer = answer


class TopUp(Policy):
    """The hooks' last trials (nightly: whole runs of tonight's answer, search/nightly/night.py), after the
    confirmation named it and ahead of any proposal still waiting; the answer stored again with them."""

    def __init__(self, run: SweepRun, hooks: SweepHooks, confirmation: Confirmation | None):
        self.run, self.hooks, self.confirmation = run, hooks, confirmation

    def finish(self, engine: Engine, run_enqueued: Callable[[int], None]) -> None:
        extra = self.hooks.top_up()
        if not extra:
            return
        aside = set_aside_waiting(self.run.study, keep_newest=extra)
        try:
            run_enqueued(extra)
        finally:
            put_back(self.run.study, aside)
        if self.confirmation is not None and self.confirmation.answer is not None:
            store(self.run, self.confirmation.answer)  # its runs, the top-ups among them


def finish_once(run: SweepRun, engine: Engine, run_enqueued: Callable[[int], None], confirms: bool) -> bool:
    """Finish the search here (the engine's `finish`: the confirmation, the hooks' top-ups) when this is the
    study's last worker searching; whether it is. The others would repeat the top-ups, or run them for another
    configuration while the search goes on: still marked `confirming`, so a worker that joins meanwhile waits
    instead of taking them. `confirms`: this sweep has an answer to confirm (it says where it went when not
    here)."""
    say = say_above(run) if confirms else (lambda line: None)
    grace_s = run.settings.stale_after_s
    workers.mark(run.study, "confirming")  # first: a worker that joins from now on waits for it
    try:
        others = workers.others_searching(run.study, grace_s)
        if others:
            say(f"confirmation: left to the last worker still searching this study ({len(others)} other(s): "
                f"{', '.join(others)}); it stores the answer on the study and on its MLflow sweep run")
            return False
        if not workers.claims_confirmation(run.study, grace_s):
            say("confirmation: another worker of this study, ended at the same moment, confirms the answer")
            return False
        engine.finish(run_enqueued)
        return True
    finally:
        workers.mark(run.study, "done")
