"""One trial: its isolated child process, device slots, the Hydra job that runs it."""
