"""Benchmarks of the policy engines themselves (prefill, KV cache reuse)."""
