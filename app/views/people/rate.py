"""Rate the simulator: guess, turn by turn, the emotion change a persona felt; then see the simulator's.

The rater picks a rating set (simulator.evaluation.ratings: persona:SPEC, fingerprint:HASH, eval:RUN,
comparison:ID, dialogue:ID) and sees its turns one at a time, blind: the persona, the dialogue before the
reply without any emotion, and the reply. The simulator's change is revealed after each answer. Ratings
export and import as JSONL; the agreement report (simulator.evaluation.agreement) sits below.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import gradio as gr

from app.agreement_plots import agreement_scatter, need_bars
from app.context import LabContext
from app.render import dialogue_html, md
from simulator.evaluation import ratings
from simulator.evaluation.agreement import agreement_report
from storage.ratings import DuplicateRating

STATS = (("spearman", "Spearman"), ("mean_abs_diff", "mean abs diff"), ("sign_agreement", "sign agreement"),
         ("mean_diff", "sim - people"), ("alpha", "raters' alpha"))


def item_html(view: dict[str, Any]) -> str:
    """The blind item: earlier messages (no emotions, no thoughts) and the reply to judge."""
    turns = [{"role": m["role"], "text": m["text"], "index": i} for i, m in enumerate(view["history"])]
    turns.append({"role": "assistant", "text": view["reply"], "index": len(turns)})
    return dialogue_html(turns, header="The reply to judge is the last message")


def persona_md(persona: dict[str, Any]) -> str:
    return (f"### {md(persona.get('name', ''))}\n**Hidden need:** {md(persona.get('hidden_need', ''))}\n\n"
            f"<details><summary>Profile and scenario</summary>\n\n{md(persona.get('persona', ''))}\n\n"
            f"{md(persona.get('background', ''))}\n</details>")


def report_md(report: dict[str, Any]) -> str:
    """The report as a Markdown table: all ratings, then per fingerprint, need and personality; one line when
    the ratings are too few for any interval (the point values so far in it)."""
    o = report["overall"]
    if all(o[s].get("ci_low") is None for s, _ in STATS):
        values = ", ".join(f"{label} {o[s]['value']:.2f}" for s, label in STATS if o[s]["value"] is not None)
        return (f"{o['n_ratings']} rating(s) of {o['n_units']} turn(s) by {o['n_raters']} rater(s): too few for an "
                f"agreement report (intervals need 3 rated turns or more, agreement between people a turn rated "
                f"twice); so far {md(values) or 'no value'}. Rate more turns and compute again.")
    notes: list[str] = []

    def cell(e: dict[str, Any], where: str) -> str:
        if e.get("why"):
            notes.append(f"- {md(where)}: {md(e['why'])}")
        if e["value"] is None:
            return "–"
        ci = f" [{e['ci_low']:.2f}, {e['ci_high']:.2f}]" if e["ci_low"] is not None else ""
        return f"{e['value']:.2f}{ci}" + (f" *{e['n_undefined']}" if e.get("n_undefined") else "")

    head = "| group | n | " + " | ".join(label for _, label in STATS) + " |\n|" + "---|" * (len(STATS) + 2)
    rows = [("all ratings", report["overall"])]
    for key in ("fingerprint_hash", "need_category", "personality"):
        rows += [(f"{key.split('_')[0]} {name}", a) for name, a in report[f"by_{key}"].items()]
    body = "\n".join(f"| {md(name)} | {a['spearman']['n']} | " + " | ".join(cell(a[s], f"{name}, {label}") for s, label in STATS)
                     + " |" for name, a in rows)
    return (f"{o['n_ratings']} rating(s) of {o['n_units']} turn(s) by {o['n_raters']} rater(s); 95% bootstrap "
            f"intervals (*k: k resamples had no value and are left out). *sim - people* above 0: the simulator "
            f"is more generous than people.\n\n{head}\n{body}" + ("\n\n**Empty cells:**\n" + "\n".join(notes)
                                                                   if notes else ""))


def _rater(name: str, request: gr.Request | None) -> str:
    return (getattr(request, "username", None) or name or "").strip()


def build(ctx: LabContext) -> None:
    store = ctx.store
    queue = gr.State([])  # items left: [{"dialogue_id", "turn_index"}]
    with gr.Row():
        with gr.Column(scale=3, min_width=300):
            rater = gr.Textbox("", label="Rater (your login name when logged in)", elem_id="rate-rater")
            rating_set = gr.Textbox("", label="Rating set", elem_id="rate-set",
                                    info="persona:SPEC · fingerprint:HASH · eval:RUN · comparison:ID · dialogue:ID")
            load = gr.Button("Load", variant="primary", elem_id="rate-load")
            progress = gr.Markdown(elem_id="rate-progress")
            persona = gr.Markdown(elem_id="rate-persona")
        with gr.Column(scale=7):
            item = gr.HTML(elem_id="rate-item")
            with gr.Row():
                with gr.Column(min_width=200):
                    change = gr.Number(None, label="Emotion change you think the persona felt (the rules clamp to "
                                       "±10)", elem_id="rate-change")
                    change_error = gr.Markdown("", elem_classes="field-error", elem_id="err-rate-change")
                note = gr.Textbox(label="Note (optional)", elem_id="rate-note")
            with gr.Row():
                submit = gr.Button("Submit", variant="primary", elem_id="rate-submit")
                skip = gr.Button("Next turn", elem_id="rate-next")
            reveal = gr.Markdown(elem_id="rate-reveal")
    with gr.Accordion("Pool ratings (JSONL)", open=True, elem_id="rate-pool"):
        with gr.Row():
            export_btn = gr.Button("Export all ratings", elem_id="rate-export")
            export_file = gr.File(label="ratings.jsonl", elem_id="rate-export-file")
        with gr.Row():
            upload = gr.File(label="Ratings file to import", file_types=[".jsonl"], type="filepath", interactive=True,
                             elem_id="rate-upload")
            keep_valid = gr.Checkbox(False, label="Import the good lines and report the bad ones "
                                                  "(default: all or nothing)")
            import_btn = gr.Button("Import", elem_id="rate-import")
        import_status = gr.Markdown(elem_id="rate-import-status")
    gr.Markdown("### Agreement: the simulator against people")
    report_btn = gr.Button("Compute the agreement report", elem_id="rate-report")
    report_out = gr.Markdown(elem_id="rate-report-table")
    with gr.Row():
        scatter = gr.Plot(elem_id="rate-scatter")
        bars = gr.Plot(elem_id="rate-bars")

    def show(items: list[dict], status: str):
        """The next item; the change box emptied (an untouched box is refused, never read as 0)."""
        if not items:
            return items, status or "**Nothing left to rate in this set.**", "", "", "", None, ""
        first = items[0]
        view = ratings.blind_view(store, first["dialogue_id"], first["turn_index"])
        return (items, f"{status} {len(items)} turn(s) left · dialogue {first['dialogue_id']}, turn "
                       f"{first['turn_index']}", persona_md(view["persona"]), item_html(view), "", None, "")

    def on_load(name, spec, request: gr.Request):
        try:
            items = ratings.rating_queue(store, spec, _rater(name, request))
        except ValueError as exc:
            return [], f"**Cannot load:** {md(exc)}", "", "", "", None, ""
        return show(items, "")

    rated_shown = gr.State(None)  # the turn just rated while it is still on the page
    load.click(lambda: None, None, rated_shown)
    shown_item = [queue, progress, persona, item, reveal, change, change_error]
    load.click(on_load, [rater, rating_set], shown_item)

    def on_submit(items, name, spec, value, note_, rated, request: gr.Request):
        if rated:  # Submit again on the turn just rated (still on the page until Next turn)
            return (items, f"**Not stored:** you already rated {md(rated)}; its judgement is shown. Press **Next "
                           "turn** for the next one.", gr.update(), gr.update(), rated, "")
        if not items:
            return items, "**Load a rating set first.**", gr.update(), gr.update(), None, ""
        if value is None or (isinstance(value, str) and not value.strip()):  # never a default the rater did not set
            return (items, "", gr.update(), gr.update(), None,
                    "⚠ change: set your guess of the persona's emotion change (a number, 0 included) before "
                    "submitting; nothing was stored")
        first = items[0]
        try:
            judged = ratings.record_rating(store, _rater(name, request), first["dialogue_id"], first["turn_index"],
                                           value, rating_set=spec, note=note_)
        except DuplicateRating as exc:
            return items[1:], f"**Not stored:** {md(exc)}", gr.update(), gr.update(), None, ""
        except ValueError as exc:  # nothing stored; the item stays
            return items, f"**Not stored:** {md(exc)}", gr.update(), gr.update(), None, f"⚠ {md(exc)}"
        shown = ratings.reveal(judged)
        lines = [f"**You said {float(value):+g}; the simulator's change was {shown['simulator_delta']:+g}.**"]
        lines += [f"- {k}: {md(v)}" for k, v in shown["thoughts"].items()]
        return (items[1:], "\n".join(lines), None, "", f"dialogue {first['dialogue_id']}, turn {first['turn_index']}",
                "")

    submit.click(on_submit, [queue, rater, rating_set, change, note, rated_shown],
                 [queue, reveal, change, note, rated_shown, change_error])
    change.input(lambda: "", None, change_error)  # the field's error goes once the field changes
    skip.click(lambda items: (*show(items, ""), None), queue, [*shown_item, rated_shown])

    def on_export():
        path = Path(tempfile.mkdtemp(prefix="ratings-")) / "ratings.jsonl"
        path.write_text(ratings.export_jsonl(store), encoding="utf-8")
        return str(path)

    export_btn.click(on_export, None, export_file)

    def on_import(file, keep):
        """The import's message; the file box is emptied so the next file can be dropped in."""
        if not file:
            return "**Choose a ratings file first.**", None
        try:
            text = ratings.decode_text(Path(file).read_bytes(), Path(file).name)
        except ValueError as exc:
            return f"**Nothing imported:** {md(exc)}", None
        report = ratings.import_jsonl(store, text, keep_valid=bool(keep))
        problems = "\n".join(f"- {md(e)}" for e in report.errors[:50])
        if report.errors and not keep:
            return f"**Nothing imported:** {len(report.errors)} bad line(s).\n{problems}", None
        return f"Imported {report.imported} rating(s)." + (f" Left out {len(report.errors)}:\n{problems}"
                                                             if report.errors else ""), None

    import_btn.click(on_import, [upload, keep_valid], [import_status, upload])

    def on_report():
        rows = ratings.agreement_rows(store)
        try:
            report = agreement_report(rows)
        except ValueError as exc:
            return f"**No report:** {md(exc)}", None, None
        return report_md(report), agreement_scatter(rows), need_bars(report)

    report_btn.click(on_report, None, [report_out, scatter, bars])

    def fill_rater(request: gr.Request):
        return getattr(request, "username", None) or gr.update()

    ctx.refresh_on_show(fill_rater, None, rater)
