"""search: find the fastest training-system configuration that still learns."""

__version__ = "0.1.0"
