"""What runs inside a trial's child process. Imports only the standard
library at module level so that unpickling it in the forkserver child is
free; torch and objectives are already loaded there."""
from __future__ import annotations

import json
import os
import traceback


def main(cfg: dict, result_path: str) -> None:
    import objectives

    try:
        result = objectives.run_trial(cfg).to_dict()
    except objectives.ConfigError as err:
        result = {"outcome": "infeasible", "reason": str(err), "metrics": {}, "info": {}}
    except BaseException as err:  # noqa: BLE001 - every failure becomes data
        name = type(err).__name__
        outcome = "oom" if isinstance(err, MemoryError) or "OutOfMemory" in name else "crashed"
        last = traceback.extract_tb(err.__traceback__)[-1:] or None
        where = f" at {os.path.basename(last[0].filename)}:{last[0].lineno}" if last else ""
        result = {"outcome": outcome, "reason": f"{name}: {err}{where}", "metrics": {}, "info": {}}
    tmp = result_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, result_path)
