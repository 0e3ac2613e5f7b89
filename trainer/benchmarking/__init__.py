"""The Sentient benchmark, as the trainer runs it: the protocol (protocol) and its runner (benchmark), the
stored eval runs (eval_runs), the checks before anything plays (checks), paired comparisons of two policies
(compare, compare_runs), and the benchmark, comparison and judge runs as jobs (benchmark_jobs, judge_jobs,
progress). The simulator's own evaluation (the Sentient score, fidelity, the judge, agreement with people)
is simulator/evaluation."""
