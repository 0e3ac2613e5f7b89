"""Compare view: two policies on the same personas, simulated user and seeds (`python -m trainer compare`):
wins / ties / losses with a paired interval and the breakdown, the pairs sorted by the difference, and one
persona's two dialogues side by side aligned by turn with both emotion curves and the user's inner thoughts
where they part."""
from __future__ import annotations

from typing import Any

import gradio as gr

from app.context import LabContext
from app.services import compare as cs
from trainer.evaluation import compare as cmp


def build(ctx: LabContext) -> None:
    store = ctx.store
    gr.Markdown("Two policies against the same personas, simulated user, seeds and rules, dialogue by dialogue. "
                "Run one with `python -m trainer compare --a POLICY --b POLICY --profiles SPEC`.")
    with gr.Row():
        pick = gr.Dropdown(choices=[], label="comparison", scale=4, elem_id="cmp-pick")
        refresh = gr.Button("Refresh", scale=1, elem_id="cmp-refresh")
    summary = gr.Markdown(cs.summary_md(None), elem_id="cmp-summary")
    pairs_table = gr.Dataframe(headers=cs.PAIR_HEADERS, value=[], interactive=False, wrap=True,
                               label="pairs, largest difference first (click one to open it)", elem_id="cmp-pairs")
    with gr.Row():
        by_need = gr.Dataframe(headers=cs.BREAKDOWN_HEADERS, value=[], interactive=False, label="by hidden need",
                               elem_id="cmp-need")
        by_personality = gr.Dataframe(headers=cs.BREAKDOWN_HEADERS, value=[], interactive=False,
                                      label="by personality type", elem_id="cmp-personality")
    pair_pick = gr.Dropdown(choices=[], label="persona", elem_id="cmp-pair")
    curves = gr.Plot(label="emotion, A and B", elem_id="cmp-curves")
    aligned = gr.HTML("", elem_id="cmp-aligned")

    def on_pick(choice: str):
        cid = cs.parse_choice(choice)
        if cid is None:
            return cs.summary_md(None), [], [], [], gr.update(choices=[], value=None)
        pairs = cmp.comparison_pairs(store, cid)
        names = cs.pair_choices(sorted(pairs, key=lambda p: (p["diff"] is None, -abs(p["diff"] or 0.0))))
        return (cs.summary_md(cmp.get_comparison(store, cid)), cs.pair_rows(pairs),
                cs.breakdown_rows(pairs, "need_category"), cs.breakdown_rows(pairs, "personality"),
                gr.update(choices=names, value=names[0] if names else None))

    def on_pair(choice: str, pair_choice: str):
        cid = cs.parse_choice(choice)
        pair = cs.find_pair(cmp.comparison_pairs(store, cid, with_turns=True), pair_choice) if cid else None
        if pair is None:
            return None, ""
        return cs.pair_figure(pair), cs.aligned_html(pair)

    def on_row(evt: gr.SelectData):
        row = evt.row_value or []
        return f"{row[0]} · seed {row[1]}" if len(row) > 1 else gr.skip()

    def on_refresh(current: Any):
        choices = cs.comparison_choices(store)
        return gr.update(choices=choices, value=current if current in choices else (choices[0] if choices else None))

    pick.change(on_pick, pick, [summary, pairs_table, by_need, by_personality, pair_pick])
    pair_pick.change(on_pair, [pick, pair_pick], [curves, aligned])
    pairs_table.select(on_row, None, pair_pick)
    refresh.click(on_refresh, pick, pick)
    ctx.refresh_on_show(on_refresh, pick, pick)
