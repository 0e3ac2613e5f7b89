"""What a causal LM does to its LM head's output before its logits (processing.py), which the learner's chunked log-probs apply."""
