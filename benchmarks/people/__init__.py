"""Benchmarks of the people-in-the-loop tools (agreement with human ratings)."""
