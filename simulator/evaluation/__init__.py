"""Evaluation on the simulator's side: the Sentient score, transcript files, replay, fidelity, published rows, probes and the judge."""
