"""Transcripts view: import a SAGE `*_result.jsonl` file, pick a collection and a dialogue, read it turn by turn
(emotion, inner thoughts and the policy's think block, collapsible) beside its emotion curve; the collection's
Sentient score / success / failure with its bootstrap interval.

Collections: imported files (simulator.evaluation.transcripts) and the store's own dialogues grouped by where they came
from (live / CLI rollouts, a training job, a benchmark run). Other views open a dialogue here through
`ctx.open_dialogue(id)` (see app.context) or the URL `?dialogue=ID`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import gradio as gr

from app.context import LabContext
from app.plots import emotion_figure, fidelity_figure
from app.render import dialogue_html, md, user_emotions
from app.services.play import shadow_emotions
from simulator.evaluation import fidelity, transcripts
from storage import Store
from storage.dialogues import load_dialogue
from storage import Dialogue
from storage.queries import (
    collection_dialogues,
    collection_filter,
    collection_key,
    fingerprint_groups,
    store_collections,
)

MAX_LISTED = 1000


def collections(store: Store) -> list[tuple[str, str]]:
    """(label, key) for every collection: imported files first, then rollouts, benchmark runs, training jobs."""
    out = [(f"{c['collection']} ({c['n']} imported)", f"import:{c['collection']}")
           for c in transcripts.list_collections(store)]
    for key, n in store_collections(store):
        kind, _, value = key.partition(":")
        label = {"source": f"{value} dialogues", "eval": f"benchmark run {value}", "job": f"training job {value}"}[kind]
        out.append((f"{label} ({n})", key))
    return out


def dialogues(store: Store, key: str) -> list[tuple[str, int]]:
    """(label, id) of a collection's dialogues, in the order they were stored (newest last)."""
    if not key:
        return []
    out = []
    for d in collection_dialogues(store, key, MAX_LISTED):
        final = "—" if d["final_emotion"] is None else f"{d['final_emotion']:.0f}"
        label = f"#{d['id']} {d['external_id']} {d['name']} · final {final} · {d['outcome'] or d['status']}"
        out.append((" ".join(label.split()), d["id"]))
    return out


def summary_md(store: Store, key: str) -> str:
    """Score / success / failure / n with the 95% interval of a collection's ended dialogues, over the
    dialogues of one simulator fingerprint (its rules included) at a time: a collection that holds several
    gets a line each, never one pooled score."""
    from app.views.benchmark import simulator_label

    if not key:
        return ""
    where = collection_filter(key)
    groups = fingerprint_groups(store, where)
    lines = []
    for g in groups:
        summary = transcripts.dialogues_summary(store, g["where"])
        if summary is None:
            continue
        errors = f" · errors {summary.n_errors}" if summary.n_errors else ""
        lines.append(f"**Score {summary.score:.1f}** (95% CI {summary.ci_low:.1f}–{summary.ci_high:.1f}) · "
                     f"success {summary.success} · failure {summary.failure} · n {summary.n}{errors} · simulator "
                     f"{md(simulator_label(g['fingerprint'], g['fingerprint_hash']))}")
    if not lines:  # the empty-collection line only when it is empty
        if not collection_dialogues(store, key, 1):
            return "No dialogues in this collection yet."
        return ("None of these dialogues is scored (running, stopped and failed ones, and those people played, "
                "are not).")
    if len(lines) == 1:
        return lines[0]
    return (f"This collection holds dialogues of {len(lines)} simulators or rule sets; each is scored on its own "
            "(never pooled):\n\n" + "\n".join(f"- {line}" for line in lines))


def fidelity_view(store: Store, key: str) -> tuple[str, Any]:
    """(summary markdown, chart) of a collection's emotion changes vs the published ones (simulator.evaluation.fidelity)."""
    if not key:
        return "", None
    label = key.partition(":")[2] if key.startswith("import:") else key.replace(":", " ")
    report = fidelity.store_report(store, collection_filter(key), label)
    return f"**Fidelity** · {report.summary()}", fidelity_figure(report)


def dialogue_view(store: Store, dialogue_id: Optional[int]) -> tuple[str, Any, str]:
    """(meta markdown, emotion figure, turns HTML) of one dialogue."""
    d = load_dialogue(store, int(dialogue_id)) if dialogue_id not in (None, "") else None
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
    series = [(f"#{d['id']}", user_emotions(d["turns"]))]
    if shadow := shadow_emotions(store, d):  # a person played it: the simulator's shadow judgement beside theirs
        series = [(f"#{d['id']} person", series[0][1]), ("simulator (shadow)", shadow)]
    fig = emotion_figure(series, title=f"Emotion per turn · dialogue {d['id']}")
    return "  \n".join(meta), fig, dialogue_html(d["turns"])


def build(ctx: LabContext) -> None:
    store = ctx.store
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
        rep = transcripts.import_file(store, Path(path), keep_valid=bool(keep))
        lines = [f"**{md(rep.collection)}**: {len(rep.dialogue_ids)} dialogue(s) imported"
                 + (f", {len(rep.duplicates)} already in the store (skipped)" if rep.duplicates else "")
                 + f", {len(rep.errors)} problem(s) in {rep.n_lines} line(s)."]
        if rep.errors and not keep:
            lines.append("Nothing was stored because of the problems below.")
        lines += [f"- {md(e)}" for e in rep.errors]
        if not rep.dialogue_ids and not rep.duplicates:
            return "\n".join(lines), gr.update(choices=collections(store)), gr.update(), gr.update()
        key = f"import:{rep.collection}"
        return "\n".join(lines), gr.update(choices=collections(store), value=key), summary_md(store, key), \
            gr.update(choices=dialogues(store, key), value=None)

    def on_collection(key):
        return summary_md(store, key), gr.update(choices=dialogues(store, key), value=None)

    def on_link(link):
        if not link:
            return [gr.update()] * 6
        d = load_dialogue(store, int(link["id"]))
        if d is None:
            return [gr.update(), gr.update(), gr.update(), f"Dialogue {int(link['id'])} does not exist.",
                    emotion_figure([]), ""]
        key = collection_key(d)
        return [gr.update(choices=collections(store), value=key), summary_md(store, key),
                gr.update(choices=dialogues(store, key), value=d["id"]), *dialogue_view(store, d["id"])]

    import_btn.click(on_import, [up, keep_valid], [report, coll, summary, pick])
    coll.input(on_collection, coll, [summary, pick])
    refresh_btn.click(lambda k: (gr.update(choices=collections(store)), *on_collection(k)), coll, [coll, summary, pick])
    pick.input(lambda i: dialogue_view(store, i), pick, [meta, plot, turns])
    # the fidelity chart is computed only while its accordion is open
    fid_open = gr.State(False)
    fid_box.expand(lambda k: (True, *fidelity_view(store, k)), coll, [fid_open, fid_md, fid_plot])
    fid_box.collapse(lambda: False, None, fid_open)
    coll.change(lambda k, is_open: fidelity_view(store, k) if is_open else (gr.skip(), gr.skip()),
                [coll, fid_open], [fid_md, fid_plot])
    ctx.refresh_on_show(lambda: gr.update(choices=collections(store)), None, coll)
    ctx.dialogue_link.change(on_link, ctx.dialogue_link, [coll, summary, pick, meta, plot, turns])
