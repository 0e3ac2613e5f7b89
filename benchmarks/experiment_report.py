"""An experiment's results as Markdown tables (the README's), and its judge radar as a PNG.

    python benchmarks/experiment_report.py --db sqlite:////work/runs/xp.db --experiment 1 \
        [--baseline RUN_ID ...] [--radar docs/images/experiment-radar.png]

Per cell, and per baseline eval run (e.g. the untrained policy, `python -m trainer benchmark` on the same
held-out personas): the held-out score with its bootstrap 95% interval, success and failure counts with
the interval of their share, reply statistics (words, question marks, think words), the judge's mean on
each of the five dimensions (one row per judge fingerprint, never averaged across judges), and the wall
time of the cell's training and benchmark jobs. The numbers are the Experiments view's
(app.services.experiments); the radar is drawn by headless chromium from plotly's own HTML.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any, Optional

CHROMIUM = "/usr/bin/chromium"


def _minutes(job: Any) -> str:
    if job is None or not job.started_at or not job.finished_at:
        return "—"
    return f"{(job.finished_at - job.started_at).total_seconds() / 60:.1f}"


def report_rows(store: Any, exp: dict[str, Any], baselines: list[int]) -> list[dict[str, Any]]:
    """One dict per row: name, label, eval_run_id, result (RESULT_HEADERS row), replies, judge groups, times."""
    from app.services import experiments
    from simulator.evaluation.judge_store import eval_run_summary
    from storage import EvalRun, Job, read_scope

    rows = []
    entries = [(experiments.cell_name(c), c["label"], c) for c in exp["cells"] if c.get("eval_run_id")]
    with read_scope(store) as s:
        for rid in baselines:
            run = s.get(EvalRun, rid)
            if run is None:
                raise SystemExit(f"--baseline: eval run {rid} does not exist")
            label = run.name or f"{run.model_ref} ({(run.config or {}).get('mode', 'direct')})"
            entries.append(("baseline", label,
                            {"index": -1, "label": run.name, "eval_run_id": rid}))
        for name, label, cell in entries:
            train = s.get(Job, cell["train_job_id"]) if cell.get("train_job_id") else None
            bench = s.get(Job, cell["benchmark_job_id"]) if cell.get("benchmark_job_id") else None
            rows.append({"name": name, "label": label, "eval_run_id": cell["eval_run_id"],
                         "result": experiments.result_row(store, cell)[2:],
                         "replies": experiments.reply_stats(store, cell["eval_run_id"]),
                         "judge": eval_run_summary(store, cell["eval_run_id"]),
                         "train_min": _minutes(train), "bench_min": _minutes(bench)})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    from app.judge_panel import judge_label
    from simulator.evaluation.judge import DIMENSION_LABELS, DIMENSIONS

    num = lambda v, d=1: "—" if v is None else f"{v:.{d}f}"  # noqa: E731
    out = ["| | cell | score | 95% CI | success | failure | n | words/reply | ?/reply | think words | "
           "train min | benchmark min |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        score, ci, succ, succ_ci, fail, fail_ci, n, _ = r["result"]
        st = r["replies"]
        out.append(f"| {r['name']} | {r['label']} | {score} | {ci} | {succ} ({succ_ci}) | {fail} ({fail_ci}) | {n} | "
                   f"{num(st['words'])} | {num(st['questions'], 2)} | {num(st['think_words'])} | {r['train_min']} | "
                   f"{r['bench_min']} |")
    judged = [(r, g) for r in rows for g in r["judge"] if g.get("means")]
    if judged:
        out += ["", "| | cell | judge | n (errors) | " + " | ".join(DIMENSION_LABELS[d] for d in DIMENSIONS) + " |",
                "|---|---|---|---:|" + "---:|" * len(DIMENSIONS)]
        for r, g in judged:
            out.append(f"| {r['name']} | {r['label']} | {judge_label(g['fingerprint'], g['judge_hash'])} | "
                       f"{g['n']} ({g['n_errors']}) | " + " | ".join(f"{g['means'][d]:.2f}" for d in DIMENSIONS) + " |")
    return "\n".join(out)


def radar_png(rows: list[dict[str, Any]], path: Path) -> Optional[Path]:
    """The judge radar of every row overlaid, saved as a PNG through headless chromium; None when unjudged."""
    from playwright.sync_api import sync_playwright

    from app.services.experiments import overlaid_radar

    fig = overlaid_radar([(f"{r['name']} {r['label']}", r["judge"]) for r in rows])
    if fig is None:
        return None
    for trace in fig.data:  # the legend names the judge model only
        trace.name = trace.name.split(" @ ")[0]
    fig.update_layout(width=900, height=560, legend=dict(orientation="v"))
    html = Path(tempfile.mkdtemp(prefix="radar-")) / "radar.html"
    fig.write_html(html, include_plotlyjs=True, full_html=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 920, "height": 580})
        page.goto(html.as_uri())
        page.wait_for_selector(".main-svg")
        page.screenshot(path=str(path))
        browser.close()
    return path


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="SQLAlchemy URL of the store")
    parser.add_argument("--experiment", type=int, required=True)
    parser.add_argument("--baseline", type=int, nargs="*", default=[], help="eval run ids to add as rows")
    parser.add_argument("--radar", type=Path, help="write the judge radar here (PNG)")
    args = parser.parse_args(argv)
    from storage import make_store
    from trainer.experiments.grid import experiment_detail

    store = make_store(args.db)
    exp = experiment_detail(store, args.experiment)
    if exp is None:
        raise SystemExit(f"--experiment: {args.experiment} does not exist in {args.db}")
    rows = report_rows(store, exp, args.baseline)
    print(f"experiment {exp['id']} {exp['name']!r}: {exp['status']}, code {exp['code_version']}, "
          f"{exp['created_at']} -> {exp['finished_at']}")
    print(markdown(rows))
    if args.radar:
        print(f"radar: {radar_png(rows, args.radar) or 'no judged dialogues'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
