"""What a sweep prints at its end: the front, the plots, the hooks' end, MLflow, the answer's panel."""
from __future__ import annotations

import shlex
import sys
from typing import Any

import optuna

from search.errors import EXIT_GAVE_UP
from search.record import MLFLOW_RUN_ID_ATTR, Answer
from search.reports.answer import print_answer
from search.reports.plots import write_report
from search.reports.tables import compare_label, compare_run_ids, front_trials, print_front
from search.sweep.answer import no_idle
from search.sweep.baseline import baseline_trials
from search.sweep.study import storage_location
from search.tracking import mlflow_client


def report(sweeper: Any, study: optuna.Study, plan: Any, sweep: Any, metric_names: list[str], run: Any,
           answer: Answer | None, last: bool) -> optuna.Study:
    """The front, the plots, the hooks' end, the answer (or why the search stopped); exit non-zero when the sweep
    gave up or a hook says so. `sweeper`: the SweeperImpl (its settings, hooks, failure policy and baseline)."""
    settings = sweeper.settings
    idle = plan.space.unused or no_idle
    print_front(study, metric_names, idle)
    report_dir = sweeper.sweep_dir / "report"
    if settings.report and not last:  # another worker still searches: its report holds the whole study
        plot_files = []
        print("report: left to the last worker searching this study (its <sweep dir>/report and MLflow sweep "
              "run get the plots of every trial)", flush=True)
    elif settings.report:
        plot_files = write_report(study, report_dir, sweep.parent_run_id)
    else:
        plot_files = []
        command = ["python", "-m", "search", "report", "--storage", storage_location(settings.storage),
                   "--study-name", study.study_name, "--out", str(report_dir)]
        print(f"report: no plots (hydra.sweeper.report=false); {shlex.join(command)} writes them", flush=True)
    hook_status = sweeper.hooks.finish(metric_names, report_dir, sweep.parent_run_id, plot_files, last=last)
    print(f"MLflow: {mlflow_client.how_to_look()}   (experiment {settings.experiment_name or plan.study_name!r}:"
          f" {mlflow_client.experiment_url(sweep.experiment_id)})", flush=True)
    trials = study.get_trials(deepcopy=False)
    answer_runs = [trials[n].user_attrs.get(MLFLOW_RUN_ID_ATTR) for n in (answer.trials[:1] if answer else [])]
    runs = list(dict.fromkeys([r for r in answer_runs if r] + compare_run_ids(study)))
    if (url := mlflow_client.compare_url(runs)) is not None:
        named = set(answer_runs) | {t.user_attrs.get(MLFLOW_RUN_ID_ATTR) for t in baseline_trials(study)}
        front_adds = any(t.user_attrs.get(MLFLOW_RUN_ID_ATTR) not in named for t in front_trials(study))
        label = compare_label(bool(answer_runs), answer is not None and answer.is_baseline,
                              bool(baseline_trials(study)), front_adds)
        print(f"MLflow, side by side ({label}): {url}", flush=True)
    if answer is not None and sweeper.baseline is not None:
        print_answer(answer, sweeper.baseline[0], idle)
    elif run is not None and run.search_ended and last:
        print(run.search_ended, flush=True)
    outcomes = run.outcomes if run is not None else []
    if sweeper.failure_policy.gives_up(outcomes):
        print(f"search: gave up: {sweeper.failure_policy.describe(outcomes)}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_GAVE_UP)
    if hook_status:
        raise SystemExit(hook_status)
    return study
