"""Human-played corpus files read and checked, one conversation at a time (stored by
simulator.evaluation.human_corpora)."""
