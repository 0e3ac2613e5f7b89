"""Fitting a simulated user to people: the monotone map of its changes and a per-reply signal."""
