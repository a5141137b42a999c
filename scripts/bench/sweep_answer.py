"""What a finished sweep in this directory answered, read back from its study and its MLflow parent run.

Prints one JSON object: the answer as the study stores it (speedup, interval, rounds, the search's and the
confirmation's wall time), the MLflow parent run's answer metrics and tags, and two override lists ready for
`python -m search run`: `baseline` (your configuration, as its first run was launched) and `contender` (the
answer, or the fastest contender when the answer is your configuration; null when there was none). The GPU
scripts use them to run both again outside the sweep.

Usage: python scripts/bench/sweep_answer.py [--storage optuna.journal] [--mlflow sqlite:///mlflow.db]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> int:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from search.record import ANSWER_ATTR, BASELINE, role
    from search.sweep.reproduce import job_overrides

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", default="optuna.journal")
    parser.add_argument("--mlflow", default="sqlite:///mlflow.db")
    args = parser.parse_args()
    storage = JournalStorage(JournalFileBackend(args.storage))
    [name] = optuna.get_all_study_names(storage)
    study = optuna.load_study(study_name=name, storage=storage)
    trials = study.get_trials(deepcopy=False)
    answer = study.user_attrs.get(ANSWER_ATTR) or {}
    baseline = [t for t in trials if role(t) == BASELINE]
    contender = None
    if answer and not answer.get("is_baseline"):
        contender = answer["overrides"]
    elif answer.get("fastest_contender"):
        contender = answer["fastest_contender"]["overrides"]
    out = {"study": name, "trials": len(trials),
           "states": {s.name: sum(t.state == s for t in trials) for s in optuna.trial.TrialState},
           "answer": {k: v for k, v in answer.items() if k not in ("overrides", "params")},
           "baseline": job_overrides(baseline[0]) if baseline else None, "contender": contender,
           "mlflow": _parent_run(args.mlflow, name)}
    print(json.dumps(out, indent=1, default=str))
    return 0


def _parent_run(uri: str, experiment: str) -> dict:
    """The sweep's MLflow parent run: its answer metrics and `search.answer*` tags."""
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(experiment)
        runs = client.search_runs([exp.experiment_id], "tags.`mlflow.parentRunId` IS NULL",
                                  order_by=["attributes.start_time DESC"], max_results=5)
        parent = next(r for r in runs if any(k.startswith("search.answer") for k in r.data.tags))
    except Exception as err:  # noqa: BLE001 (a report line, not a failure of the sweep)
        return {"error": f"{type(err).__name__}: {err}"}
    metrics = {k: v for k, v in parent.data.metrics.items()
               if k.startswith(("speedup", "answer_", "baseline_", "accuracy_floor", "confirm"))}
    tags = {k: v for k, v in parent.data.tags.items() if k.startswith("search.answer")}
    return {"run_id": parent.info.run_id, "status": parent.info.status, "metrics": metrics, "tags": tags}


if __name__ == "__main__":
    sys.exit(main())
