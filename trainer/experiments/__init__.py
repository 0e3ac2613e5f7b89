"""Experiments: a grid of training configs, each cell trained as a job and benchmarked on a held-out set."""
