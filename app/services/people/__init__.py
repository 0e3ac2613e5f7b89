"""Services of the people-in-the-loop views that measure a simulator against published people."""
