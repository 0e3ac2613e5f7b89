"""The Training view's plans: the quick plan and the presets (training_plan), the timed probe (probe_task)."""
