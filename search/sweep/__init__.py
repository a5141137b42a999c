"""The sweep: the Hydra sweeper, the space, the Optuna study and what it is told.

sweeper.py plans, opens, runs and reports; planning.py checks every input
before anything exists; trial_loop.py proposes and launches trials and
closing.py closes them; jobs.py is the Hydra side (compose, launch);
hooks.py is where a kind of sweep (nightly) plugs in.
"""
