"""What the registry (objectives/knobs/__init__.py) knows about one knob.

Each knob module ends with one ``KNOB = Knob(...)`` that names what the module
owns: its config keys and their value rules, the config section whose
dataclass it defines, its combination rules, its hardware check and its
``apply_*`` steps. Everything that lists knobs (the parser, doctor, the
search space, the README table, the run order) reads it from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from objectives.config_check import Rule
from objectives.hardware import Hardware

if TYPE_CHECKING:
    from objectives.config import TrialConfig


@dataclass(frozen=True)
class Knob:
    name: str
    """How the README and messages name it ("model pruning")."""
    section: str
    """The config key its ``apply_*`` and hardware check take: a section (``parallel``) or a top-level value
    (``precision``)."""
    values: str
    """Its values in words, for the README table."""
    acts_on: str
    """What it changes (model, loader, step, process), for the README table."""
    rules: Mapping[str, Rule] = field(default_factory=dict)
    """Value rules of the keys it owns, by dotted key: (rule text, check, suggested fix)."""
    config: type | None = None
    """The dataclass of ``section`` when this module defines it (a section may hold several knobs' keys)."""
    check_combinations: Callable[[TrialConfig], None] | None = None
    """Rules that tie its keys to others on any machine; raises CombinationError."""
    combination_rules: tuple[str, ...] = ()
    """Those rules in words, for doctor ("precision=fp8 needs parallel.compile other than none ...")."""
    check_hardware: Callable[[Any, Hardware], None] | None = None
    """``check_hardware(cfg.<section>, hardware)``: raises HardwareError for what this machine cannot run."""
    doctor_values: Callable[[Hardware], Mapping[str, list]] | None = None
    """Key -> the values doctor's table tries on this machine (those whose runnability depends on it)."""
    company: Mapping[tuple[str, Any], Mapping[str, Any]] = field(default_factory=dict)
    """(key, value) -> the other values it needs to act at all (2:4 needs a ratio and bf16), for doctor's table."""
    applies: tuple[str, ...] = ()
    """The functions objectives/run.py calls for it, each placed in ``objectives.knobs.RUN_ORDER``."""
    unused: Callable[[Any], tuple[str, ...]] | None = None
    """``unused(cfg.<section>)``: its keys that this section's values leave without effect (persistent workers
    without workers), so a sweep does not spend a trial on moving them (search/sweep/start_design.py)."""
    resolved: Callable[[Any, Hardware], Mapping[str, Any]] | None = None
    """``resolved(cfg.<section>, hardware)``: its keys written as "auto" (null), as a trial on this machine
    runs them (``loader.pin_memory: null`` is on with a GPU, off without), so a sweep does not spend a trial on
    moving one to the value it already runs with (search/sweep/start_design.py)."""
    speed_only: tuple[str, ...] = ()
    """Its keys that change how fast the same training runs, not what it computes (workers, threads, compile):
    a sweep times such a variation without training it again (search/sweep/staging.py). Every other key is
    maths: batch size, precision, model pruning, devices (the global batch), gradient accumulation."""
    work_neutral: tuple[str, ...] = ()
    """Its keys that change what the training computes but not the work a step does (the learning rate): moved
    alone, the same training runs at your configuration's speed, so the sweep's start design does not spend a
    trial on moving one alone (search/sweep/start_design.py). Leave a key out when in doubt (weight decay adds a
    step's op when it is not zero): such a key is only moved once more at the start."""
