"""The nightly sweep: one study per night, plugged into the sweep as hooks (sweep_hooks.py),
the regression test, the morning report."""
