"""search: find the fastest training-system configuration that still learns."""

__version__ = "0.1.0"

from search.sweep.objective_name import register as _register_objective_name
from search.sweep.sweep_dir import register as _register_sweep_id

_register_sweep_id()  # conf/ names the sweep directory with it (search/sweep/sweep_dir.py)
_register_objective_name()  # conf/nightly.yaml names the night after the objective (search/sweep/objective_name.py)
