"""What the Compare view shows of a stored comparison (trainer/benchmarking/compare.py): the pairs table, the
summary, and one persona's two dialogues side by side aligned by reply, with both emotion curves."""
from __future__ import annotations

from typing import Any, Optional

import plotly.graph_objects as go

from app.plots import emotion_figure
from app.render import code, inner_html, md, text, turn_html
from trainer.benchmarking import compare

PAIR_HEADERS = ["persona", "seed", "need", "personality", "A", "B", "B - A", "first reply diff", "first emotion diff"]
BREAKDOWN_HEADERS = ["group", "n", "wins", "ties", "losses", "mean B - A"]


def comparison_choices(store: Any) -> list[str]:
    """'#id A vs B (profiles)' of every stored comparison, newest first."""
    return [f"#{c['id']} {c['a']} vs {c['b']} ({c['profiles']}, {c['status']})"
            for c in compare.list_comparisons(store)]


def parse_choice(value: Optional[str]) -> Optional[int]:
    head = (value or "").split(" ", 1)[0]
    return int(head[1:]) if head.startswith("#") and head[1:].isdigit() else None


def _num(x: Optional[float]) -> str:
    return "" if x is None else f"{x:g}"


def pair_rows(pairs: list[dict[str, Any]]) -> list[list[Any]]:
    """Pairs sorted by the size of the difference (largest first; failed pairs last)."""
    ordered = sorted(pairs, key=lambda p: (p["diff"] is None, -abs(p["diff"] or 0.0), p["persona"], p["seed"]))
    return [[p["persona"], p["seed"], p["need_category"], p["personality"], _num(p["a_final"]), _num(p["b_final"]),
             _num(p["diff"]), _num(p["first_reply_diff_turn"]), _num(p["first_emotion_diff_turn"])] for p in ordered]


def summary_md(comparison: Optional[dict[str, Any]]) -> str:
    if not comparison:
        return "Pick a comparison in the list above, or start one with the form."
    s = comparison.get("summary") or {}
    cfg = comparison.get("config") or {}
    head = (f"**#{comparison['id']}** A = {code(cfg.get('a', ''))}, B = {code(cfg.get('b', ''))} · "
            f"{md(cfg.get('profiles', ''))} · simulator {md(cfg.get('simulator', ''))} · "
            f"{cfg.get('seeds', 1)} seed(s) · {md(comparison.get('status', ''))}")
    if comparison.get("error"):
        head += f"\n\nerror: {md(comparison['error'])}"
    if not s.get("n"):
        return head
    return (head + f"\n\nB over A: **{s['wins']} wins, {s['ties']} ties, {s['losses']} losses**; mean difference "
            f"{s['mean_diff']:+.1f} (95% paired bootstrap {s['ci_low']:+.1f} to {s['ci_high']:+.1f}), "
            f"sign test p = {s['sign_test_p']:.3f}, n = {s['n']}")


def breakdown_rows(pairs: list[dict[str, Any]], key: str) -> list[list[Any]]:
    return [[group, s["n"], s["wins"], s["ties"], s["losses"], f"{s['mean_diff']:+.1f}"]
            for group, s in compare.breakdown(pairs, key).items()]


def pair_choices(pairs: list[dict[str, Any]]) -> list[str]:
    return [f"{p['persona']} · seed {p['seed']}" for p in pairs]


def find_pair(pairs: list[dict[str, Any]], choice: Optional[str]) -> Optional[dict[str, Any]]:
    return next((p for p in pairs if f"{p['persona']} · seed {p['seed']}" == choice), None)


def _emotions(turns: list[dict]) -> list[Optional[float]]:
    return [t["emotion"] for t in turns if t["role"] == "user"]


def pair_figure(pair: dict[str, Any]) -> go.Figure:
    """Both emotion curves on one chart, the first turn where the emotion differs marked."""
    fig = emotion_figure([("A", _emotions(pair["a_turns"])), ("B", _emotions(pair["b_turns"]))],
                         title=f"{pair['persona']}: emotion per turn, A and B")
    if pair["first_emotion_diff_turn"] is not None:
        fig.add_vline(x=pair["first_emotion_diff_turn"], line_dash="dot", line_color="#6a1b9a",
                      annotation_text="first difference", annotation_position="top left")
    return fig


def _cell(step: dict[str, Any], side: str, turn_index: int, highlight: bool) -> str:
    parts = []
    if step["reply"] is not None:
        parts.append(turn_html({"role": "assistant", "text": step["reply"], "think_text": step["think"],
                                "index": turn_index}))
    if step["user"] is not None:
        parts.append(turn_html({"role": "user", "text": step["user"], "emotion": step["emotion"],
                                "inner": step["inner"], "index": turn_index + 1}))
    cls = " differs" if highlight else ""
    return f"<td class='cmp-cell{cls}' data-side='{side}'>{''.join(parts)}</td>"


def aligned_html(pair: dict[str, Any]) -> str:
    """Both dialogues side by side, one row per reply number (0 = the opening); the first rows where the
    replies or the emotions differ are marked, with the user's inner thoughts there on each side."""
    a, b = pair["a_aligned"], pair["b_aligned"]
    firsts = {pair["first_reply_diff_turn"], pair["first_emotion_diff_turn"]} - {None}
    empty = {"reply": None, "think": "", "user": None, "emotion": None, "inner": {}}
    rows = []
    for n in range(max(len(a), len(b))):
        sa, sb = (a[n] if n < len(a) else empty), (b[n] if n < len(b) else empty)
        mark = n in firsts
        label = "opening" if n == 0 else f"turn {n}"
        rows.append(f"<tr class='cmp-row{' cmp-first' if mark else ''}' data-turn='{n}'><th>{text(label)}</th>"
                    f"{_cell(sa, 'a', 2 * n, mark)}{_cell(sb, 'b', 2 * n, mark)}</tr>")
    notes = []
    n = pair["first_emotion_diff_turn"]
    if n is not None:
        for side, steps in (("A", a), ("B", b)):
            if n < len(steps) and steps[n]["inner"]:
                notes.append(f"<div class='cmp-why'><b>{side}, turn {n}: the user's inner thoughts</b>"
                             f"{inner_html(steps[n]['inner'])}</div>")
    return ("<table class='cmp-table'><thead><tr><th></th><th>A</th><th>B</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>" + "".join(notes))

