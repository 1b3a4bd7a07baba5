"""eq-tui: run batches of ML experiments on GPU machines, with a terminal UI."""

__version__ = "0.1.0"
