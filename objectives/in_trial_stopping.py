"""Early stopping inside a trial: a throughput probe and a reported learning curve.

Two checks, both optional, both decided on rank 0 and obeyed by every rank:

- **throughput probe** (``train.stop_below_samples_per_s``, set per trial by
  the sweep in two-objective mode): after the warm-up and
  ``train.probe_steps`` timed steps (rounded up to whole timing windows; as
  many whole windows as end within the first half of the trial's steps when
  fewer do, at least one; no probe when none does: probe_end_step), the probe's
  throughput (median of its windows, any loader restart it timed charged per
  epoch as in objectives/timing.py; none timed yet, none charged: the probe
  errs fast, so it never stops a trial that would pass) is compared with the
  bar; below it, the trial stops. The sweep sets the bar so that a trial stopped here
  cannot be the answer, or cannot reach the Pareto front when it searches
  for the front (docs/early_stopping.md).
- **learning curve** (a ``report(step, value) -> should_stop`` callable, given
  by the sweep in single-objective mode): every ``train.eval_every_samples``
  (0: every ~10% of the budget) the model is evaluated and its
  ``val_accuracy`` reported at step k for the k-th evaluation (k from 1), so
  trials with other batch sizes report at the same steps, after the same
  number of samples; the callable says whether to stop (an Optuna pruner
  decides, on the sweep's side).

Both act at a pause of the loop (``due``): the loop first closes its timing
span (objectives/timing.py), so evaluations stay out of the throughput
windows and the GPU energy intervals, like time-to-accuracy's.
This module knows nothing of Optuna: ``report`` is a plain callable.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable

from objectives.config import TrainConfig
from objectives.knobs.parallel import rank0_decides
from objectives.timing import Span, WindowPlan, restart_s_per_step, throughput_summary, window_times_s

Report = Callable[[int, float], bool]  # (step, value) -> should the trial stop


@dataclass
class EarlyStop:
    plan: WindowPlan
    global_batch: int
    probe_end_step: int  # 0: no probe
    min_throughput_samples_per_s: float | None
    every_steps: int  # 0: no learning curve
    curve: bool  # every rank knows whether rank 0 reports, so all take part in the decision
    report: Report | None  # rank 0's reporter; None on other ranks
    evaluate: Callable[[], dict[str, float]]
    steps_per_epoch: float | None = None  # the loader restarts the probe timed are charged per epoch, as in run.py
    probe_throughput_samples_per_s: float | None = None
    reported: dict[int, float] = field(default_factory=dict)
    last_eval: dict[str, float] = field(default_factory=dict)
    eval_wall_s: float = 0.0
    reason: str = ""
    stopped_by: str = ""  # "probe" or "learning_curve" once it stopped the trial

    def due(self, steps_done: int, steps: int) -> bool:
        """Whether ``should_stop`` has work after this step: the loop pauses its timing for it."""
        probe = bool(self.probe_end_step) and steps_done == self.probe_end_step
        return probe or (self.curve and steps_done % self.every_steps == 0 and steps_done < steps)

    def should_stop(self, steps_done: int, steps: int, spans: list[Span]) -> bool:
        """Called at the loop's pauses with its timed spans so far; True (on every rank) when the trial must stop."""
        if self.probe_end_step and steps_done == self.probe_end_step and self._probe_too_slow(spans):
            return True
        if self.curve and steps_done % self.every_steps == 0 and steps_done < steps:
            return self._curve_says_stop(steps_done)
        return False

    def _probe_too_slow(self, spans: list[Span]) -> bool:
        restart = restart_s_per_step(spans, self.steps_per_epoch)
        summary = throughput_summary(window_times_s(spans, self.plan, restart), self.plan, self.global_batch)
        self.probe_throughput_samples_per_s = summary.get("throughput_samples_per_s")
        bar = self.min_throughput_samples_per_s
        slow = bar is not None and self.probe_throughput_samples_per_s is not None and \
            self.probe_throughput_samples_per_s < bar
        if rank0_decides(slow):
            self.stopped_by = "probe"
            self.reason = (f"probe throughput {self.probe_throughput_samples_per_s or 0:.4g} samples/s is below "
                           f"{bar:.4g} (train.stop_below_samples_per_s): a trial already measured is faster beyond the "
                           f"margin, so this one cannot win")
            return True
        return False

    def _curve_says_stop(self, steps_done: int) -> bool:
        start = time.perf_counter()
        self.last_eval = self.evaluate()
        self.eval_wall_s += time.perf_counter() - start
        step = steps_done // self.every_steps
        stop = False
        if self.report is not None and "val_accuracy" in self.last_eval:
            self.reported[step] = self.last_eval["val_accuracy"]
            stop = bool(self.report(step, self.last_eval["val_accuracy"]))
        if rank0_decides(stop):
            self.stopped_by = "learning_curve"
            samples = steps_done * self.global_batch
            self.reason = (f"early stopping ended the learning curve at evaluation {step} ({samples} samples, "
                           f"val_accuracy {self.last_eval.get('val_accuracy', math.nan):.4g})")
            return True
        return False

    def metrics(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.probe_throughput_samples_per_s is not None:
            out["probe_throughput_samples_per_s"] = self.probe_throughput_samples_per_s
        if self.curve:
            out["early_stop_evals"] = float(len(self.reported))
            out["early_stop_eval_wall_s"] = self.eval_wall_s
        return out


def probe_end_step(probe_steps: int, plan: WindowPlan, steps: int) -> int:
    """The step after which the throughput probe decides, 0 for none: the warm-up and whole windows covering
    ``probe_steps``, fewer when those would end past half of the trial's ``steps``, at least one. A trial with few
    steps at the budget (a large global batch: batch_size=256 at 8,000 samples is 32 steps) then still gets a
    probe: one window of its steps times as many samples as the windows of a smaller batch, and stopping after it
    saves more than half of the training. None when not even one window ends by half the steps: a probe there
    would save too little."""
    wanted = max(1, math.ceil(probe_steps / plan.window_steps))
    fit = (steps // 2 - plan.warmup_steps) // plan.window_steps
    windows = min(wanted, fit, plan.windows)
    return plan.warmup_steps + windows * plan.window_steps if windows >= 1 else 0


def plan_early_stop(train: TrainConfig, plan: WindowPlan, steps: int, global_batch: int, report: Report | None,
                    curve: bool, evaluate: Callable[[], dict[str, float]],
                    steps_per_epoch: float | None = None) -> EarlyStop | None:
    """None when neither check applies; the probe only when a window of it ends within the first half of the
    steps (probe_end_step)."""
    probe_end = 0
    if train.stop_below_samples_per_s is not None:
        probe_end = probe_end_step(train.probe_steps, plan, steps)
    every_samples = train.eval_every_samples or max(1, train.budget_samples // 10)
    every_steps = max(1, math.ceil(every_samples / global_batch)) if curve else 0
    if not probe_end and not curve:
        return None
    probe_plan = WindowPlan(plan.warmup_steps, plan.window_steps, (probe_end - plan.warmup_steps) // plan.window_steps)
    return EarlyStop(probe_plan, global_batch, probe_end, train.stop_below_samples_per_s, every_steps,
                     curve, report, evaluate, steps_per_epoch)
