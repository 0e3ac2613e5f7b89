"""Personas: the simulated user's profile, its files, the built-in library, the store, specs and sets, lint, coverage and LLM generation."""
