"""Test fixtures that speak the real protocols, kept out of the product packages.

- `scripted_server`: a local OpenAI-compatible HTTP server that plays the simulated user, the policy and
  the social-cognition judge (`scripted_judge`), with a latency model (`server_latency`) and fault injection.
- `tiny_model`: a tiny random Qwen2-style model and byte-level tokenizer with a chat template, built offline.
Used by tests/ and benchmarks/; nothing in app/, trainer/, simulator/ or storage/ imports them.
"""
