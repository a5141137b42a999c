"""Bad command lines fail before Hydra starts: one line, exit status 2.

Hydra would report a malformed override or a missing config option with a
traceback hint and exit status 1; composing the fixed (non-sweep) overrides
here first turns those into the same one-line rule/value/fix as every other
bad input.
"""
from __future__ import annotations

from hydra import compose, initialize_config_dir
from hydra._internal.utils import get_args_parser

from search.errors import BadInput
from search.paths import conf_dir
from search.space import parse_overrides


def check_command_line(args: list[str]) -> None:
    parsed_args = get_args_parser().parse_args(args)
    overrides = parse_overrides(parsed_args.overrides)
    if parsed_args.config_dir or parsed_args.config_path or parsed_args.config_name:
        return  # another config tree: Hydra itself reports on it
    fixed = [o.input_line for o in overrides if not o.is_sweep_override()]
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            compose("config", overrides=fixed, return_hydra_config=True)
    except Exception as err:  # Hydra's composition errors have no common base worth naming
        first = " ".join(str(err).strip().splitlines()[0].split()) if str(err).strip() else type(err).__name__
        raise BadInput(f"overrides must name existing config groups, options and keys; {first}; "
                       f"fix: see conf/ for the names (python -m search multirun --info defaults)") from None
