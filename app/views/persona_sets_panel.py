"""The Personas view's "Sets" panel: the stored persona sets (name, size, hash, source), a new set from the
view's current filters, a seeded 80/20 stratified split, export, and a set's need x personality coverage
as a heatmap with its empty cells listed. Logic lives in simulator.personas.sets and
simulator.personas.coverage."""
from __future__ import annotations

from typing import Any, Optional

import gradio as gr
import plotly.graph_objects as go

from app.context import LabContext
from app.render import md
from simulator.access import export_path
from simulator.personas import sets as persona_sets
from simulator.personas.coverage import Coverage, coverage
from simulator.personas.specs import PersonaSpecError
from storage import Store

SET_HEADERS = ["name", "size", "hash", "source", "made from"]
SPLIT_TAGS = [("any", ""), ("train", "train"), ("heldout", "heldout")]


def set_rows(store: Store) -> list[list[Any]]:
    """One row per stored set; the hash is the members' as they are now, marked when it changed since."""
    rows = []
    for s in persona_sets.list_sets(store):
        current = s.current_hash or "members deleted"
        made = ", ".join(f"{k}={v}" for k, v in (s.params.get("filters") or s.params).items())
        rows.append([s.name, s.size, current + (f" (was {s.content_hash})" if s.changed else ""), s.source_kind,
                     made])
    return rows


def coverage_figure(cov: Optional[Coverage], title: str = "") -> go.Figure:
    """need x personality heatmap; empty cells are shown as 0 in the coldest colour and marked ✕."""
    fig = go.Figure()
    if cov is not None:
        total = cov.total()
        fig.add_trace(go.Heatmap(z=total, x=list(cov.personalities), y=list(cov.needs), colorscale="Blues",
                                 zmin=0, text=[[str(c) if c else "✕" for c in row] for row in total],
                                 texttemplate="%{text}", hovertemplate="%{y} × %{x}: %{z}<extra></extra>"))
    else:  # no empty grid with plotly's default -1..6 axes: say what fills it
        fig.add_annotation(text="Pick a persona set (or filter the personas) to see its coverage", showarrow=False,
                           xref="paper", yref="paper", x=0.5, y=0.5)
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
    fig.update_layout(title=title or "Coverage: hidden need × personality", height=420,
                      margin=dict(l=10, r=10, t=40, b=10), yaxis=dict(autorange="reversed"))
    return fig


def empty_cells_markdown(cov: Coverage) -> str:
    empty = cov.empty()
    if not empty:
        return f"{cov.n} persona(s); every need × personality cell is covered."
    return "\n".join([f"**{len(empty)} empty cell(s)** of {cov.n} persona(s):"] +
                     [f"- {md(n)} × {md(p)}" for n, p, _ in empty])


def create_from_view(store: Store, name: str, search: str, need: str, personality: str, language: str,
                     split: str) -> str:
    """A set from the Personas view's filters; the message the panel shows."""
    try:
        s = persona_sets.create_from_filters(store, name, search=(search or "").strip(), need=need or "",
                                             personality=personality or "", language=language or "", split=split or "")
    except persona_sets.SetError as exc:
        return f"**Not created.** {md(exc.field)}: {md(exc.problem)}"
    return f"Created set **{md(s.name)}**: {s.size} persona(s), hash `{s.content_hash}`."


def split_from_view(store: Store, name: Optional[str], fraction: Any, seed: Any) -> str:
    if not name:
        return "**Not split.** set: pick a set first."
    try:
        train, heldout = persona_sets.split_set(store, name, float(fraction or 0), int(seed or 0))
    except persona_sets.SetError as exc:
        return f"**Not split.** {md(exc.field)}: {md(exc.problem)}"
    except PersonaSpecError as exc:
        return f"**Not split.** set: {md(exc)}"
    return (f"Split **{md(name)}** into **{md(train.name)}** ({train.size}) and **{md(heldout.name)}** "
            f"({heldout.size}).")


def delete_from_view(store: Store, name: Optional[str]) -> str:
    """Delete a stored set (its personas stay, and runs keep the set name and hash they recorded)."""
    if not name:
        return "**Not deleted.** set: pick a set first."
    if not persona_sets.delete_set(store, name):
        return f"**Not deleted.** set: no stored set named {md(name)}."
    return f"Deleted set **{md(name)}**; its personas stay in the store."


def build(ctx: LabContext, filters: list) -> tuple:
    """The panel; `filters` are the view's search, need, personality and language inputs. Returns
    (fn, inputs, outputs) that refresh its table and set choices, for panels that make sets."""
    store = ctx.store
    with gr.Accordion("Persona sets", open=True, elem_id="sets-panel"):
        with gr.Row():
            with gr.Column(scale=3):
                table = gr.Dataframe([], headers=SET_HEADERS, datatype="str", type="array", interactive=False,
                                     label="Stored sets (click one for its coverage)", elem_id="sets-table")
                with gr.Row():
                    name = gr.Textbox(label="New set name", scale=2, elem_id="sets-name")
                    split_tag = gr.Dropdown(SPLIT_TAGS, value="", label="Split tag", scale=1)
                    create = gr.Button("Create from the current filters", scale=2, elem_id="sets-create")
                with gr.Row():
                    chosen = gr.Dropdown([], label="Set", scale=2, elem_id="sets-chosen")
                    fraction = gr.Number(0.8, label="Train fraction", scale=1, elem_id="sets-fraction")
                    seed = gr.Number(0, precision=0, label="Seed", scale=1, elem_id="sets-seed")
                    split = gr.Button("Split train / held-out", scale=2, elem_id="sets-split")
                    delete = gr.Button("Delete the set", variant="stop", scale=1, elem_id="sets-delete")
                with gr.Row():
                    fmt = gr.Radio([("lab", "lab"), ("RLVER", "rlver"), ("SAGE", "sage")], value="lab",
                                   label="Export format", scale=2)
                    export = gr.Button("Export the set", scale=1, elem_id="sets-export")
                export_file = gr.File(label="Exported set", interactive=False, elem_id="sets-export-file")
                status = gr.Markdown(elem_id="sets-status")
            with gr.Column(scale=3):
                plot = gr.Plot(coverage_figure(None), show_label=False, elem_id="sets-coverage")
                empty = gr.Markdown(elem_id="sets-empty")

    def refresh(current: Optional[str]):
        names = persona_sets.set_names(store)
        return set_rows(store), gr.update(choices=names, value=current if current in names else None)

    def show_coverage(set_name: Optional[str]):
        if not set_name:
            return coverage_figure(None), ""
        try:
            cov = coverage(persona_sets.set_profiles(store, set_name))
        except PersonaSpecError as exc:
            return coverage_figure(None), f"**No coverage:** {md(exc)}"
        return coverage_figure(cov, f"Coverage of {set_name}: hidden need × personality"), empty_cells_markdown(cov)

    def on_create(set_name, tag, *flt):
        message = create_from_view(store, set_name, *flt, tag)
        picked = {"value": set_name.strip()} if message.startswith("Created") else {}  # show its coverage
        return message, set_rows(store), gr.update(choices=persona_sets.set_names(store), **picked)

    def on_split(set_name, frac, seed_):
        message = split_from_view(store, set_name, frac, seed_)
        return message, set_rows(store), gr.update(choices=persona_sets.set_names(store))

    def on_delete(set_name):
        return (delete_from_view(store, set_name), set_rows(store),
                gr.update(choices=persona_sets.set_names(store), value=None))

    def on_export(set_name, f):
        if not set_name:
            return gr.update(), "**Not exported.** set: pick a set first."
        out = export_path(set_name, f)
        try:
            n = persona_sets.export_set(store, set_name, out, f)
        except (ValueError, PersonaSpecError) as exc:
            return gr.update(), f"**Not exported.** {md(exc)}"
        return str(out), f"Exported {n} persona(s) of **{md(set_name)}** ({f} format)."

    ctx.refresh_on_show(refresh, [chosen], [table, chosen])
    create.click(on_create, [name, split_tag, *filters], [status, table, chosen])
    split.click(on_split, [chosen, fraction, seed], [status, table, chosen])
    export.click(on_export, [chosen, fmt], [export_file, status])
    chosen.change(show_coverage, [chosen], [plot, empty])

    def on_pick(evt: gr.SelectData):
        return evt.row_value[0] if evt.row_value else gr.skip()

    table.select(on_pick, None, chosen)
    delete.click(on_delete, [chosen], [status, table, chosen])
    return refresh, [chosen], [table, chosen]
