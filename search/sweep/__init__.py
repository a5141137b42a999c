"""The sweep: the Hydra sweeper, the space, the Optuna study and what it is told."""
