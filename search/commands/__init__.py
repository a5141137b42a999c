"""The commands: `python -m search <command>` (doctor, selftest, report, export) and the command-line checks."""
