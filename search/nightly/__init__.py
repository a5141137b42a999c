"""The nightly sweep: one study per night, the regression test, the morning report."""
