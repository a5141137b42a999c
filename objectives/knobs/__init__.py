"""One module per system knob; each ``apply_*`` takes only its own config section."""
