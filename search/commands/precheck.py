"""Bad command lines fail before Hydra starts: one line, exit status 2.

Hydra would report a malformed override or a missing config option with a
traceback hint and exit status 1; composing the fixed (non-sweep) overrides
here first turns those into the same one-line rule/value/fix as every other
bad input. The numeric settings (search/sweep/settings.py) are checked on the
values as typed, and the trial's again as composed.

`python -m search run` has no space: its configuration is the trial's, so
the checks its trial's child would make before training (each value, the
rules that tie knobs together, this machine's hardware; a sweep applies the
same to its fixed settings, search/sweep/combinations.py) refuse it here,
before Hydra creates the run's directory, instead of a trial that starts a
process to end `infeasible` (exit 6).

`hydra.sweeper.params.batch_size=choice(32,64)`, the form users of the old
Optuna sweeper plugin write, is a sweep over Hydra's own config, which Hydra
refuses. That plugin read its params as text (one `key=value` line each),
so the sweep is handed on as the quoted text it stands for, the form Hydra
accepts and the plugin's users quoted by hand: every form then gives the
same space as `batch_size=choice(32,64)`.
"""
from __future__ import annotations

import re

from hydra import compose, initialize_config_dir
from hydra._internal.utils import get_args_parser
from omegaconf import OmegaConf

from search.composition_errors import dotted_keys, first_line, fix_for
from search.errors import BadInput
from search.measure.hardware import check_memory_cap
from search.paths import conf_dir
from search.sweep.settings import check_overrides, check_section
from search.sweep.space import parse_overrides

PARAMS_PREFIX = "hydra.sweeper.params."


def check_command_line(args: list[str], one_trial: bool = False) -> list[str]:
    """The arguments to hand Hydra: `args`, with sweeps under hydra.sweeper.params quoted; with
    ``one_trial`` (`python -m search run`), the composed trial's knobs checked as well."""
    parsed_args = get_args_parser().parse_args(args)
    overrides = parse_overrides(parsed_args.overrides)
    swept = next((o for o in overrides if o.is_sweep_override()), None) if one_trial else None
    if swept is not None:
        raise BadInput(f"python -m search run trains one configuration, one value per knob; got {swept.input_line}; "
                       f"fix: python -m search multirun {swept.input_line} (a sweep), or give {swept.key_or_group} "
                       f"one value")
    quoted = {o.input_line: quote_params_sweep(o.input_line) for o in overrides
              if o.is_sweep_override() and o.key_or_group.startswith(PARAMS_PREFIX)}
    for o in overrides:
        if o.is_sweep_override() and o.is_hydra_override() and o.input_line not in quoted:
            raise BadInput(f"only knobs and hydra.sweeper.params entries can be swept, a hydra setting takes one "
                           f"value; got {o.input_line}; fix: give {o.key_or_group} one value")
    check_overrides(overrides)
    args = [quoted.get(a, a) for a in args]
    if parsed_args.config_dir or parsed_args.config_path or parsed_args.config_name:
        return args  # another config tree: Hydra itself reports on it
    fixed = [o.input_line for o in overrides if not o.is_sweep_override()] + list(quoted.values())
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            cfg = compose("config", overrides=fixed, return_hydra_config=True)
    except Exception as err:  # Hydra's composition errors have no common base worth naming
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            keys = dotted_keys(compose("config"))
        fix = fix_for(err, keys) or "see conf/ for the names (python -m search multirun --info defaults)"
        raise BadInput(f"overrides must name existing config groups, options and keys; {first_line(err)}; "
                       f"fix: {fix}") from None
    check_section("trial", OmegaConf.to_container(cfg.trial, resolve=True) if "trial" in cfg else None)
    if "trial" in cfg and cfg.trial.get("max_memory_bytes") is not None:
        from search.measure.machine import gpus

        check_memory_cap(cfg.trial.max_memory_bytes, gpus().count)
    if one_trial and not (parsed_args.cfg or parsed_args.info or parsed_args.shell_completion):
        check_trial_rules({key: cfg[key] for key in cfg if key != "hydra"})
    return args


def check_trial_rules(job: dict) -> None:
    """The checks one trial's child makes before it trains (objectives/run.py), made on this machine's facts."""
    from objectives import ConfigError
    from objectives.config import parse_values
    from objectives.instantiate import check_objective
    from objectives.knobs import broken_rules, machine_first
    from search.measure.machine import machine_hardware

    try:
        trial = parse_values(OmegaConf.to_container(OmegaConf.create(job), resolve=True))
        check_objective(trial.objective)
        if getattr(trial.objective, "model", None) is not None:  # built once, as the sweep does (its preflight)
            from objectives.custom_check import check_custom

            check_custom(trial.objective)
        # The rules that tie knobs together, and this machine's checks first (a rule's fix would not make it run
        # here), except for a function, which applies what it declares.
        here = machine_hardware() if getattr(trial.objective, "callable", None) is None else None
        if (first := machine_first(broken_rules(trial, here))) is not None:
            raise first
    except ConfigError as err:
        raise BadInput(str(err)) from None


def quote_params_sweep(line: str) -> str:
    """`[+]hydra.sweeper.params.k=<sweep>` -> the same entry with the sweep's text as a quoted string,
    added or replaced (`++`) as `k=<sweep>` would be, whether the space's params have `k` or not."""
    key, _, text = line.partition("=")
    body = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, text.strip())  # backslashes before a quote
    return "++" + key.lstrip("+") + "='" + body.replace("'", "\\'") + "'"  # ++: set, whether in params or not
