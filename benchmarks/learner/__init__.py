"""Benchmarks of the learner's numerics (the chunked LM head's precision)."""
