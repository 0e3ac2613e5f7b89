"""Command lines of `python -m simulator` that have a module of their own."""
