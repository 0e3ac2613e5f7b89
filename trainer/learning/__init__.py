"""Learning: the advantage estimators and losses, the learner, the RL training loop, checkpoints and distribution."""
