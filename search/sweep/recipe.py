"""What the field already knows: the combination a practitioner tries first on this hardware.

Before any search, an engineer who knows nanoGPT's and torchtitan's defaults
sets a few knobs at once on a GPU, and the obvious ones on a CPU. The sweep
measures that combination right after your configuration's runs, so its
answer is never slower than that first guess when the guess keeps your
accuracy (the guess is a configuration of the study like any other: it can
be the answer, and the confirmation measures it again). The moves per
hardware are `wanted`'s, listed with their reasons in docs/search.md; each
applies only where the space sweeps the knob, at the nearest value the
space holds.

It is one trial, marked `search.recipe`, a proposal in every other way:
staging times it only when it moves only speed-only knobs, early stopping
stops it when its probe is slower than your configuration (it then cannot
be the answer), and it counts in n_trials. When it runs out of memory or
loses your accuracy, the start design takes its batch size halfway back
(search/sweep/start_design.py).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

RECIPE_ATTR = "search.recipe"  # on the trial: the hardware whose practitioner's recipe it is


@dataclass(frozen=True)
class Facts:
    """The hardware facts the recipe reads."""

    cores: int  # CPU cores the sweep may use
    gpu: str | None = None  # the GPU's name; None on a CPU
    gpu_capability: tuple[int, int] | None = None
    cpu_bf16: bool = False  # the CPU has native bf16 (AVX512-BF16 or AMX)

    def text(self) -> str:
        if self.gpu:
            cap = f", compute capability {self.gpu_capability[0]}.{self.gpu_capability[1]}" \
                if self.gpu_capability else ""
            return f"{self.gpu}{cap}"
        return f"CPU, {self.cores} cores" + (", native bf16" if self.cpu_bf16 else "")


def cpu_has_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU computes bf16 natively (its flags name avx512_bf16 or amx_bf16); False when unknown."""
    try:
        with open(cpuinfo) as f:
            flags = next((line for line in f if line.startswith("flags")), "")
    except OSError:
        return False
    return any(flag in flags.split() for flag in ("avx512_bf16", "amx_bf16"))


def facts_here(hardware: Any, gpu_name: str | None = None) -> Facts:
    """This machine's facts from the knobs' hardware record (objectives/hardware.py Hardware)."""
    if hardware.gpu_count:
        return Facts(hardware.cpu_cores, gpu_name or "NVIDIA GPU", hardware.compute_capability)
    return Facts(hardware.cpu_cores, cpu_bf16=cpu_has_bf16())


def wanted(facts: Facts, baseline: Mapping[str, Any]) -> dict[str, Any]:
    """Knob -> the value the practitioner sets on this hardware (a number: the largest value the space holds at
    or below it; math.inf: the largest the space holds)."""
    if facts.gpu:
        ampere = (facts.gpu_capability or (0, 0)) >= (8, 0)
        return {"precision": "bf16" if ampere else "fp16", "parallel.compile": "default", "optim.fused": True,
                "loader.pin_memory": True, "batch_size": math.inf}
    devices = baseline.get("parallel.devices") or 1
    moves: dict[str, Any] = {"parallel.threads": max(1, facts.cores // int(devices)),
                             "loader.num_workers": max(1, facts.cores // 4)}
    if facts.cpu_bf16:
        moves["precision"] = "bf16"
    return moves


def _nearest(dist: BaseDistribution, value: Any) -> Any | None:
    """The space's value for `value`: itself when held; for a number, the largest held at or below it (the
    largest of all for math.inf); None when the space holds nothing for it."""
    if isinstance(dist, CategoricalDistribution):
        choices = list(dist.choices)
    elif isinstance(dist, IntDistribution):
        choices = list(range(dist.low, dist.high + 1, dist.step))
    else:
        return None
    if not isinstance(value, float) and value in choices:
        return value
    numbers = [c for c in choices if isinstance(c, (int, float)) and not isinstance(c, bool)]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and numbers:
        below = [c for c in numbers if c <= value]
        return max(below) if below else None
    return None


def recipe_params(facts: Facts, baseline: Mapping[str, Any],
                  distributions: Mapping[str, BaseDistribution]) -> dict[str, Any]:
    """Your configuration with the practitioner's moves this space can take; equal to it when none."""
    params = dict(baseline)
    for knob, value in wanted(facts, baseline).items():
        if knob in distributions and knob in params:
            near = _nearest(distributions[knob], value)
            if near is not None:
                params[knob] = near
    return params


def enqueue_recipe(study: optuna.Study, baseline: Mapping[str, Any], params: Mapping[str, Any], space: Any,
                   hardware: str) -> str | None:
    """Enqueue the recipe's configuration (`params`) when it moves a knob from your configuration and keeps to
    the space's rules; the line saying so, or None."""
    moved = {k: v for k, v in params.items() if baseline.get(k) != v}
    if not moved:
        return None
    runs = space.runs_as if space.runs_as is not None else (lambda p: dict(p))
    if space.broken_rule(params) is not None or runs(dict(params)) == runs(dict(baseline)):
        return None
    study.enqueue_trial(dict(params), user_attrs={RECIPE_ATTR: hardware}, skip_if_exists=False)
    return ("recipe: what a practitioner tries first on " + hardware + ": "
            + ", ".join(f"{k}={v}" for k, v in moved.items()) + ", measured next")
