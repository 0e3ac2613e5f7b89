"""The simulated user (SAGE's Sentient Agent): the agent, its emotion rules, parsing, fingerprint, prompt packs and backends."""
