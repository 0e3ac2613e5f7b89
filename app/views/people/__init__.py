"""People in the loop: the Play the user and Rate the simulator views (docs/human-evaluation.md)."""
