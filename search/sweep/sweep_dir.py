"""The sweep directory, one per invocation.

Hydra's default sweep directory, `multirun/<date>/<time>`, is the same for
two sweeps started in the same second in the same working directory (workers
sharing one study, two cron lines at 02:30), and they overwrite each other's
`0/`, `1/` and `report/`. conf/config.yaml and conf/nightly.yaml therefore
end the time with `-${search.sweep_id:}`: six hex digits drawn once per
process, at its first resolution: drawn at import, every process forked
from one that had imported search (workers started from one Python with
the fork start method) shared one id, and so one directory. Random rather
than the process id, which repeats across hosts and containers (a pod's
sweep is often pid 1) sharing one directory.

Registered with `use_cache=True`, like Hydra's own `now`: the first
resolution is stored in the config, and Hydra copies that cache into every
job's config (`load_sweep_config`), also to the processes of the joblib and
submitit launchers, so the sweeper, its jobs and its report agree on one
directory. A `hydra.sweep.dir` set by the user is used as given.
"""
from __future__ import annotations

import functools
import secrets

from omegaconf import OmegaConf

RESOLVER = "search.sweep_id"


@functools.cache
def sweep_id() -> str:
    """This process's id, drawn at its first call: 16.7 million values, so two sweeps in one second all but
    never meet."""
    return secrets.token_hex(3)


def register() -> None:
    """Idempotent; `import search` calls it, before any conf/ is composed."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, sweep_id, use_cache=True)
