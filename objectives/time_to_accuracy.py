"""Time to accuracy, MLPerf style: train until ``train.target_val_accuracy``, then stop.

With a target set, training pauses every ``train.eval_every_samples``
(0: every ~10% of the budget) and at its last step to evaluate on rank 0;
all ranks stop together once ``val_accuracy`` reaches the target.
``time_to_accuracy_s`` is the training wall clock from the first step to
the end of the evaluation that reached the target, evaluations included
(they are part of getting there), while the throughput windows leave the
evaluations out (they are not training speed). Not reaching the target
within the budget is a result too: ``reached_target`` 0 and no
``time_to_accuracy_s``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from objectives.config import TrainConfig
from objectives.knobs.parallel import rank0_decides


@dataclass
class TargetAccuracy:
    target: float
    every_steps: int
    evaluate: Callable[[], dict[str, float]]  # rank 0's evaluation; other ranks return {}
    last_eval: dict[str, float] = field(default_factory=dict)
    evals: int = 0
    eval_wall_s: float = 0.0
    last_eval_wall_s: float = 0.0
    time_to_accuracy_s: float | None = None

    def due(self, steps_done: int, steps: int) -> bool:
        return steps_done % self.every_steps == 0 or steps_done == steps

    def reached(self, train_start_s: float) -> bool:
        """Evaluate now; True (on every rank) once the target is reached."""
        start = time.perf_counter()
        self.last_eval = self.evaluate()
        self.evals += 1
        hit = rank0_decides(self.last_eval.get("val_accuracy", -1.0) >= self.target)
        now = time.perf_counter()
        self.last_eval_wall_s = now - start
        self.eval_wall_s += now - start
        if hit:
            self.time_to_accuracy_s = now - train_start_s
        return hit

    def metrics(self) -> dict[str, float]:
        out = {"reached_target": float(self.time_to_accuracy_s is not None), "target_evals": float(self.evals)}
        out["target_eval_wall_s"] = self.eval_wall_s
        if self.time_to_accuracy_s is not None:
            out["time_to_accuracy_s"] = self.time_to_accuracy_s
        return out


def plan_target_accuracy(
    train: TrainConfig, global_batch: int, evaluate: Callable[[], dict[str, float]]
) -> TargetAccuracy | None:
    """None without a target; otherwise evaluate every ``eval_every_samples`` (rounded up to whole steps)."""
    if train.target_val_accuracy is None:
        return None
    every_samples = train.eval_every_samples or max(1, train.budget_samples // 10)
    return TargetAccuracy(train.target_val_accuracy, max(1, math.ceil(every_samples / global_batch)), evaluate)
