"""The trial's typed config (objectives.TrialConfig), parsed once on the sweep
side when the trial is proposed, and handed as it is to the device slots, the
isolation and the trial's child, which never parses the dict again."""
from __future__ import annotations

from typing import Any


def parse_trial(cfg: dict[str, Any]) -> Any:
    """objectives.TrialConfig, or None when the parser refuses `cfg`: the trial's child then
    parses the dict itself and ends `infeasible` with the parser's reason, as before."""
    from objectives import ConfigError, parse_config  # imported where trials are prepared

    try:
        return parse_config(cfg)
    except ConfigError:
        return None
