"""The command-line entry points of `python -m trainer` (trainer/__main__.py dispatches to them)."""
