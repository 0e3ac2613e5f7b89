"""Transcripts view: import a SAGE `*_result.jsonl` file, pick a collection and a dialogue, read it turn by turn
(emotion, inner thoughts and the policy's think block, collapsible) beside its emotion curve; the collection's
Sentient score / success / failure with its bootstrap interval.

Collections: imported files (simulator.transcripts) and the store's own dialogues grouped by where they came
from (live / CLI rollouts, a training job, a benchmark run). Other views open a dialogue here through
`ctx.open_dialogue(id)` (see app.context) or the URL `?dialogue=ID`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import gradio as gr
from sqlalchemy import func, select

from app.context import LabContext
from app.plots import emotion_figure, fidelity_figure
from app.render import dialogue_html, md, user_emotions
from simulator import fidelity
from simulator import transcripts as tr
from simulator.scoring import sentient_summary
from storage import Dialogue, read_scope
from storage.dialogues import load_dialogue

MAX_LISTED = 1000


def collection_key(d: dict[str, Any]) -> str:
    """The collection a stored dialogue belongs to, as a dropdown value."""
    if d.get("source") == "import":
        return f"import:{d.get('collection', '')}"
    if d.get("eval_run_id") is not None:
        return f"eval:{d['eval_run_id']}"
    if d.get("job_id") is not None:
        return f"job:{d['job_id']}"
    return f"source:{d.get('source') or 'rollout'}"


def collections(engine) -> list[tuple[str, str]]:
    """(label, key) for every collection: imported files first, then rollouts, benchmark runs, training jobs."""
    out = [(f"{c['collection']} ({c['n']} imported)", f"import:{c['collection']}") for c in tr.list_collections(engine)]
    with read_scope(engine) as s:
        for src, n in s.execute(select(Dialogue.source, func.count(Dialogue.id)).where(
                Dialogue.source != "import", Dialogue.job_id.is_(None), Dialogue.eval_run_id.is_(None))
                .group_by(Dialogue.source)):
            out.append((f"{src} dialogues ({n})", f"source:{src}"))
        for run, n in s.execute(select(Dialogue.eval_run_id, func.count(Dialogue.id))
                                .where(Dialogue.eval_run_id.is_not(None)).group_by(Dialogue.eval_run_id)
                                .order_by(Dialogue.eval_run_id.desc())):
            out.append((f"benchmark run {run} ({n})", f"eval:{run}"))
        for job, n in s.execute(select(Dialogue.job_id, func.count(Dialogue.id))
                                .where(Dialogue.job_id.is_not(None), Dialogue.eval_run_id.is_(None))
                                .group_by(Dialogue.job_id).order_by(Dialogue.job_id.desc())):
            out.append((f"training job {job} ({n})", f"job:{job}"))
    return out


def _where(key: str):
    kind, _, value = key.partition(":")
    if kind == "import":
        return (Dialogue.source == "import", Dialogue.collection == value)
    if kind == "eval":
        return (Dialogue.eval_run_id == int(value),)
    if kind == "job":
        return (Dialogue.job_id == int(value), Dialogue.eval_run_id.is_(None))
    return (Dialogue.source == value, Dialogue.job_id.is_(None), Dialogue.eval_run_id.is_(None))


def dialogues(engine, key: str) -> list[tuple[str, int]]:
    """(label, id) of a collection's dialogues, in the order they were stored (newest last)."""
    if not key:
        return []
    with read_scope(engine) as s:
        rows = s.scalars(select(Dialogue).where(*_where(key)).order_by(Dialogue.id.desc()).limit(MAX_LISTED)).all()
        out = []
        for d in reversed(rows):
            name = (d.persona_snapshot or {}).get("name") or d.persona_id or ""
            final = "—" if d.final_emotion is None else f"{d.final_emotion:.0f}"
            label = f"#{d.id} {d.external_id or ''} {name} · final {final} · {d.outcome or d.status}"
            out.append((" ".join(label.split()), d.id))
        return out


def summary_md(engine, key: str) -> str:
    """Score / success / failure / n with the 95% interval of a collection's ended dialogues."""
    if not key:
        return ""
    with read_scope(engine) as s:
        rows = s.execute(select(Dialogue.final_emotion, Dialogue.status).where(
            *_where(key), Dialogue.status.in_(("finished", "failed")))).all()
    if not rows:
        return "No finished dialogues in this collection yet."
    summary = sentient_summary([None if st == "failed" or e is None else e for e, st in rows])
    errors = f" · errors {summary.n_errors}" if summary.n_errors else ""
    return (f"**Score {summary.score:.1f}** (95% CI {summary.ci_low:.1f}–{summary.ci_high:.1f}) · "
            f"success {summary.success} · failure {summary.failure} · n {summary.n}{errors}")


def fidelity_view(engine, key: str) -> tuple[str, Any]:
    """(summary markdown, chart) of a collection's emotion changes vs the published ones (simulator.fidelity)."""
    if not key:
        return "", None
    label = key.partition(":")[2] if key.startswith("import:") else key.replace(":", " ")
    report = fidelity.store_report(engine, _where(key), label)
    return f"**Fidelity** · {report.summary()}", fidelity_figure(report)


def dialogue_view(engine, dialogue_id: Optional[int]) -> tuple[str, Any, str]:
    """(meta markdown, emotion figure, turns HTML) of one dialogue."""
    d = load_dialogue(engine, int(dialogue_id)) if dialogue_id not in (None, "") else None
    if d is None:
        return ("Pick a dialogue." if dialogue_id in (None, "") else f"Dialogue {md(dialogue_id)} does not exist.",
                emotion_figure([]), "")
    snap = d.get("persona_snapshot") or {}
    final = "—" if d["final_emotion"] is None else f"{d['final_emotion']:.0f}"
    meta = [f"**#{d['id']} · {md(snap.get('name') or d.get('persona_id') or '')}** · policy {md(d['policy_ref'] or '—')}"
            f" · mode {md(d['mode'])} · {d['n_turns']} policy turns · final emotion **{final}** · "
            f"{md(d['outcome'] or d['status'])}"]
    if d.get("fingerprint_hash"):
        meta.append(f"simulator {md((d.get('simulator_fingerprint') or {}).get('backend', ''))} "
                    f"fingerprint {md(d['fingerprint_hash'][:12])}")
    if d.get("error"):
        meta.append(f"error: {md(d['error'])}")
    fig = emotion_figure([(f"#{d['id']}", user_emotions(d["turns"]))], title=f"Emotion per turn · dialogue {d['id']}")
    return "  \n".join(meta), fig, dialogue_html(d["turns"])


def build(ctx: LabContext) -> None:
    engine = ctx.engine
    with gr.Row():
        with gr.Column(scale=2):
            up = gr.File(label="Transcript file (SAGE *_result.jsonl)", file_types=[".jsonl"], type="filepath",
                         elem_id="transcript-file")
            keep_valid = gr.Checkbox(label="Keep the valid lines when some are bad", value=False)
            import_btn = gr.Button("Import", elem_id="transcript-import")
            report = gr.Markdown(elem_id="transcript-import-report")
        with gr.Column(scale=5):
            with gr.Row():
                coll = gr.Dropdown(label="Collection", choices=[], value=None, scale=3,  # filled on load (after any login)
                                   elem_id="transcript-collection")
                refresh_btn = gr.Button("Refresh", scale=0, min_width=90)
            summary = gr.Markdown(elem_id="transcript-summary")
            with gr.Accordion("Fidelity: emotion changes vs the published DeepSeek-V3 judgements", open=False,
                              elem_id="transcript-fidelity-box") as fid_box:
                fid_md = gr.Markdown(elem_id="transcript-fidelity-summary")
                fid_plot = gr.Plot(label="emotion changes", elem_id="transcript-fidelity")
            pick = gr.Dropdown(label="Dialogue", choices=[], value=None, elem_id="transcript-dialogue")
    meta = gr.Markdown(elem_id="transcript-meta")
    with gr.Row():
        with gr.Column(scale=4):
            plot = gr.Plot(label="Emotion per turn", elem_id="transcript-plot")
        with gr.Column(scale=6):
            turns = gr.HTML(elem_id="transcript-turns")

    def on_import(path, keep):
        if not path:
            return "Choose a file first.", gr.update(), gr.update(), gr.update()
        rep = tr.import_file(engine, Path(path), keep_valid=bool(keep))
        lines = [f"**{md(rep.collection)}**: {len(rep.dialogue_ids)} dialogue(s) imported"
                 + (f", {len(rep.duplicates)} already in the store (skipped)" if rep.duplicates else "")
                 + f", {len(rep.errors)} problem(s) in {rep.n_lines} line(s)."]
        if rep.errors and not keep:
            lines.append("Nothing was stored because of the problems below.")
        lines += [f"- {md(e)}" for e in rep.errors]
        if not rep.dialogue_ids and not rep.duplicates:
            return "\n".join(lines), gr.update(choices=collections(engine)), gr.update(), gr.update()
        key = f"import:{rep.collection}"
        return "\n".join(lines), gr.update(choices=collections(engine), value=key), summary_md(engine, key), \
            gr.update(choices=dialogues(engine, key), value=None)

    def on_collection(key):
        return summary_md(engine, key), gr.update(choices=dialogues(engine, key), value=None)

    def on_link(link):
        if not link:
            return [gr.update()] * 6
        d = load_dialogue(engine, int(link["id"]))
        if d is None:
            return [gr.update(), gr.update(), gr.update(), f"Dialogue {int(link['id'])} does not exist.",
                    emotion_figure([]), ""]
        key = collection_key(d)
        return [gr.update(choices=collections(engine), value=key), summary_md(engine, key),
                gr.update(choices=dialogues(engine, key), value=d["id"]), *dialogue_view(engine, d["id"])]

    import_btn.click(on_import, [up, keep_valid], [report, coll, summary, pick])
    coll.input(on_collection, coll, [summary, pick])
    refresh_btn.click(lambda k: (gr.update(choices=collections(engine)), *on_collection(k)), coll, [coll, summary, pick])
    pick.input(lambda i: dialogue_view(engine, i), pick, [meta, plot, turns])
    # the fidelity chart is computed only while its accordion is open
    fid_open = gr.State(False)
    fid_box.expand(lambda k: (True, *fidelity_view(engine, k)), coll, [fid_open, fid_md, fid_plot])
    fid_box.collapse(lambda: False, None, fid_open)
    coll.change(lambda k, is_open: fidelity_view(engine, k) if is_open else (gr.skip(), gr.skip()),
                [coll, fid_open], [fid_md, fid_plot])
    ctx.refresh_on_show(lambda: gr.update(choices=collections(engine)), None, coll)
    ctx.dialogue_link.change(on_link, ctx.dialogue_link, [coll, summary, pick, meta, plot, turns])
