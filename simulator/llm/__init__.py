"""LLM plumbing under the simulator and the policy: traffic limits for OpenAI-compatible endpoints and the packaged local models."""
