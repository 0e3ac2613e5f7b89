"""The multi-turn rollout: many policy <-> simulated-user dialogues run to the end, and their data."""
