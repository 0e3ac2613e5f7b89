"""The Sentient benchmark: the protocol runner (benchmark) and its stored eval runs (eval_runs)."""
