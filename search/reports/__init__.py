"""What the user reads: tables, progress line, plots, and the rule that picks a configuration."""
