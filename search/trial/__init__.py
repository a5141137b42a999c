"""One trial: its isolated child process, device slots, the Hydra job that runs it,
its typed config parsed once (typed_config.py) and its process tree ended (process_tree.py)."""
