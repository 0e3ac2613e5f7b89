"""Measures of a simulated user against people beyond rank agreement (the calibration curve, the realism of its
messages, survey scores, the interval by dialogues rated), reported by simulator.evaluation.human_agreement."""
