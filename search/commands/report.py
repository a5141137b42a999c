"""`python -m search report`: a study's Pareto front in the terminal, and its
plots (search/reports/plots.py) on disk and on the sweep's MLflow parent run.

Every multirun ends with the same report, written to `<sweep dir>/report/`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import optuna

from search.tracking.mlflow_client import configure_client
from search.errors import BadInput, exit_bad_input
from search.record import MLFLOW_PARENT_RUN_ID_ATTR
from search.reports.plots import write_report
from search.reports.tables import print_front
from search.sweep.study import DEFAULT_STORAGE, open_storage, study_metrics


def parent_run_id(study: optuna.Study) -> str | None:
    """The MLflow parent run of the study's latest sweep."""
    for trial in reversed(study.get_trials(deepcopy=False)):
        if trial.user_attrs.get(MLFLOW_PARENT_RUN_ID_ATTR):
            return trial.user_attrs[MLFLOW_PARENT_RUN_ID_ATTR]
    return None


def open_study(storage: str | None, study_name: str | None) -> optuna.Study:
    """The named study, or the only one in the storage; bad input otherwise. A command reads a study: it creates
    no journal where there is none, and names its own option in a fix."""
    target = storage or DEFAULT_STORAGE
    if "://" not in target and not Path(target).is_file():
        raise BadInput(f"--storage must name an existing study storage; got {target}, which does not exist here; "
                       f"fix: run from the sweep's directory, or --storage PATH_OR_URL")
    try:
        opened = open_storage(storage)
    except BadInput as err:
        raise BadInput(str(err).replace("hydra.sweeper.storage", "--storage")) from None
    names = [s.study_name for s in opened.get_all_studies()]
    if study_name is None and len(names) == 1:
        study_name = names[0]
    if study_name not in names:
        raise BadInput(f"--study-name must name a study in the storage; got {study_name!r}, the storage holds "
                       f"{names or 'no studies'}; fix: --study-name {names[0] if names else 'NAME'}")
    return optuna.load_study(study_name=study_name, storage=opened)


def add_study_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--storage", default=None,
                        help="journal file or SQLAlchemy URL, as hydra.sweeper.storage (default ./optuna.journal)")
    parser.add_argument("--study-name", default=None, help="default: the only study in the storage")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m search report", description=__doc__.split("\n\n")[0])
    add_study_arguments(parser)
    parser.add_argument("--out", type=Path, default=None, help="directory for the plots (default report-<study>)")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    configure_client()
    try:
        study = open_study(args.storage, args.study_name)
    except BadInput as err:
        exit_bad_input(err)
    print_front(study, study_metrics(study))
    files = write_report(study, args.out or Path(f"report-{study.study_name}"), parent_run_id(study))
    return 0 if files else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
