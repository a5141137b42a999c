"""The trial's side of Optuna's pruners: report the learning curve to its own
Optuna trial, from the isolated child process, through the study storage.

`objectives/` calls a plain `report(step, value) -> should_stop`; this is
that callable. It re-attaches to the trial by study name and trial number
(`optuna.load_study` + `optuna.trial.Trial(study, trial_id)`), so the pruner
sees every completed trial of the study and works across process boundaries
and across Hydra launchers: the journal file and RDB storages are both made
for several processes. The storage URL travels as a function argument, in
memory, never through a saved config.

Picklable (it opens the storage on first use) so that DDP ranks started by
forkserver can carry it; only rank 0 calls it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any



@dataclass
class TrialReporter:
    storage: str  # a journal file path, an RDB URL or a grpc:// proxy, as search.study.trial_storage gives it
    study_name: str
    trial_number: int
    pruner: Any  # an optuna.pruners.BasePruner, built by the sweep side from hydra.sweeper.pruner
    _trial: Any = field(default=None, repr=False, compare=False)

    def __call__(self, step: int, value: float) -> bool:
        trial = self._trial or self._attach()
        if len(trial.study.directions) > 1:  # Optuna's pruners refuse multi-objective studies; the probe rule applies
            return False
        maximize = trial.study.direction.name == "MAXIMIZE"
        trial.report(value if maximize else 1.0 - value, step)  # minimize: the error, so lower is better
        return bool(trial.should_prune())

    def _attach(self) -> Any:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.load_study(study_name=self.study_name, storage=open_trial_storage(self.storage),
                                  sampler=optuna.samplers.RandomSampler(), pruner=self.pruner)
        trial_id = study._storage.get_trial_id_from_study_id_trial_number(study._study_id, self.trial_number)
        self._trial = optuna.trial.Trial(study, trial_id)
        return self._trial

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_trial": None}


def open_trial_storage(storage: str) -> Any:
    """The study's storage as search.study.trial_storage names it (gRPC proxy, RDB URL or journal path),
    opened without the sweep-side checks and journal repair a trial must not run."""
    from optuna.storages import JournalStorage, RDBStorage
    from optuna.storages.journal import JournalFileBackend

    if storage.startswith("grpc://"):
        from search.sweep.grpc_storage import open_grpc

        return open_grpc(storage)
    if "://" in storage:
        return RDBStorage(storage)
    return JournalStorage(JournalFileBackend(storage))
