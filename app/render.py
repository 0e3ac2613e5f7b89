"""Safe rendering of user-authored text (personas, transcripts, model output) for the views.

Every string that came from a user, a file or a model goes through `text()` (HTML) or `md()` (Markdown)
before it reaches the page, so `<script>` or `<img onerror=...>` shows as text and never runs.
"""
from __future__ import annotations

import html
import json
import re
from typing import Any, Iterable, Optional

from simulator.user.rules import tier

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def text(value: Any) -> str:
    """HTML-escaped text with line breaks kept."""
    return html.escape("" if value is None else str(value), quote=True).replace("\n", "<br>")


def md(value: Any) -> str:
    """Text for a gr.Markdown: HTML escaped and Markdown punctuation backslash-escaped (shows literally).
    Quotes stay as they are: they are harmless in Markdown text, and their entities (&#x27;) would have
    their '#' escaped below and show as '&#x27;'."""
    s = html.escape("" if value is None else str(value), quote=False)
    return _MD_SPECIAL.sub(r"\\\1", s).replace("\n", "  \n")


def code(value: Any) -> str:
    """A Markdown code span of `value`, shown as typed: inside a code span Markdown takes every character
    literally (a backslash escape or an HTML entity would show as such), so nothing is escaped but the
    span's own delimiter (a backtick becomes a quote) and line breaks (spaces)."""
    raw = ("" if value is None else str(value)).replace("`", "'").replace("\r", " ").replace("\n", " ")
    return f"`{raw}`" if raw.strip() else "` `"


def fenced(value: Any) -> str:
    """A Markdown code block of `value`, shown as typed: inside a fence every character is literal, so only a
    run of backticks that could close it early (and let what follows render as Markdown: an image, a link) is
    changed, to quotes."""
    raw = "" if value is None else str(value)
    return "```\n" + re.sub(r"`{3,}", lambda m: "'" * len(m.group()), raw) + "\n```"


def _fmt_value(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return text(json.dumps(value, ensure_ascii=False, indent=1))
    return text(value)


def details(summary: str, body_html: str, open_: bool = False, cls: str = "") -> str:
    """A collapsible block; `summary` is plain text (escaped here), `body_html` is already safe HTML."""
    return (f"<details class='{cls}'{' open' if open_ else ''}><summary>{text(summary)}</summary>"
            f"<div class='details-body'>{body_html}</div></details>")


def inner_html(inner: Optional[dict]) -> str:
    """The simulated user's inner thoughts (analysis fields, planning, components) as a definition list."""
    if not inner:
        return "<em>no inner thoughts recorded</em>"
    rows = "".join(f"<dt>{text(k)}</dt><dd>{_fmt_value(v)}</dd>" for k, v in inner.items() if v not in ("", None))
    return f"<dl class='inner'>{rows}</dl>"


def emotion_badge(emotion: Optional[float], delta: Optional[float]) -> str:
    if emotion is None:
        return ""
    d = "" if delta is None else f" ({delta:+.0f})"
    t = tier(float(emotion))
    return f"<span class='emo tier-{t}' data-emotion='{float(emotion):.0f}'>emotion {float(emotion):.0f}{d} · {t}</span>"


EMPTY_MESSAGE = "(empty message)"


def turn_html(turn: dict) -> str:
    """One message bubble: user turns with emotion and collapsible inner thoughts, assistant turns with the
    collapsible think block. `turn` has the keys of storage Turn rows (role, text, think_text, emotion, ...)."""
    role = turn.get("role", "")
    who = "User" if role == "user" else "Policy"
    parts = [f"<div class='turn turn-{text(role)}' data-index='{int(turn.get('index', 0))}'>",
             f"<div class='turn-head'><b>{who}</b> {emotion_badge(turn.get('emotion'), turn.get('delta'))}</div>"]
    if role == "assistant" and turn.get("think_text"):
        parts.append(details("think", text(turn["think_text"]), cls="think"))
    said = turn.get("text") or ""
    if said.strip():
        parts.append(f"<div class='turn-text'>{text(said)}</div>")
    else:  # SAGE's loop goes on after an empty message, and so does the benchmark: show that one was said
        parts.append(f"<div class='turn-text turn-empty'>{EMPTY_MESSAGE}</div>")
    notes, errors = split_turn_problems(turn.get("error") or "")
    for note in notes:  # a reply ended by its cap is the protocol working: a note, not an error
        parts.append(f"<div class='turn-note'>{text(note)}</div>")
    if errors:
        parts.append(f"<div class='turn-error'>error: {text('; '.join(errors))}</div>")
    if role == "user" and turn.get("inner"):
        parts.append(details("inner thoughts", inner_html(turn.get("inner")), cls="inner-thoughts"))
    parts.append("</div>")
    return "".join(parts)


CUT_PREFIX = "reply cut at "  # trainer.rollout.dialogue_steps' words for a reply ended by the per-reply token cap


def split_turn_problems(error: str) -> tuple[list[str], list[str]]:
    """(neutral notes, errors) of a turn's stored problems: 'reply cut at 96 tokens (no end of turn)' becomes
    the note 'reply ended at the cap of 96 tokens (no end of turn)'; anything else stays an error."""
    notes, errors = [], []
    for part in (p.strip() for p in error.split("; ") if p.strip()):
        if part.startswith(CUT_PREFIX):
            count, _, why = part[len(CUT_PREFIX):].partition(" tokens")
            notes.append(f"reply ended at the cap of {count} tokens{why}")
        else:
            errors.append(part)
    return notes, errors


def dialogue_html(turns: Iterable[dict], header: str = "", footer: str = "") -> str:
    """A whole dialogue as safe HTML. `header`/`footer` are plain text (escaped)."""
    body = "".join(turn_html(t) for t in turns)
    head = f"<div class='dlg-head'>{text(header)}</div>" if header else ""
    foot = f"<div class='dlg-foot'>{text(footer)}</div>" if footer else ""
    return f"<div class='dialogue'>{head}{body or '<em>no turns yet</em>'}{foot}</div>"


def user_emotions(turns: Iterable[dict]) -> list[Optional[float]]:
    """The emotion after each user turn, in order (the curve's y values)."""
    return [t.get("emotion") for t in turns if t.get("role") == "user"]


CSS = """
.dialogue {display:flex; flex-direction:column; gap:8px; max-height:640px; overflow-y:auto; padding:4px;}
.turn {border-radius:10px; padding:8px 12px; max-width:92%; line-height:1.45; font-size:14px;}
.turn-user {background:var(--background-fill-secondary); align-self:flex-start; border:1px solid var(--border-color-primary);}
.turn-assistant {background:var(--color-accent-soft); align-self:flex-end;}
.turn-partial {background:var(--color-accent-soft); align-self:flex-end; border:1px dashed var(--color-accent); opacity:0.85;}
.turn-head {font-size:12px; opacity:.85; margin-bottom:2px;}
.turn-text {overflow-wrap:anywhere;}
.turn-empty {font-style:italic; opacity:.7;}
.cmp-table {width:100%; border-collapse:collapse; table-layout:fixed;}
.cmp-table td, .cmp-table th {vertical-align:top; border-bottom:1px solid #ddd; padding:4px;}
.cmp-table th {width:5.5em; text-align:left;}
.cmp-row.cmp-first {background:#f3e5f5;}
.cmp-cell.differs {outline:2px solid #8e24aa;}
.turn-error {color:#c62828; font-size:12px;}
.turn-note {font-size:12px; opacity:.7; font-style:italic;}
.emo {border-radius:6px; padding:1px 6px; margin-left:6px; font-weight:600;}
.tier-S {background:#c8e6c9;} .tier-A {background:#dcedc8;} .tier-B {background:#fff9c4;}
.tier-C {background:#ffe0b2;} .tier-F {background:#ffcdd2;}
details.think, details.inner-thoughts {font-size:12px; margin:4px 0; opacity:.9;}
dl.inner dt {font-weight:600;} dl.inner dd {margin:0 0 4px 12px; white-space:pre-wrap;}
.dlg-head, .dlg-foot {font-size:12px; opacity:.8;}
.field-error p {color:#c62828 !important; font-size:13px; margin:0;}
.sim-note {font-size:12px;}
.live-row {display:flex; gap:10px; align-items:flex-start; overflow-x:auto;}
.live-col {flex:1 1 0; min-width:280px;}
"""


# How a dialogue ended, in words a researcher reads (outcomes of simulator.user.rules and the dialogue rollout)
OUTCOME_WORDS = {"success": "ended in success (the user's emotion reached the top)",
                 "failure": "ended in failure (the user's emotion fell to the floor)",
                 "goodbye": "ended with the user saying goodbye", "max_turns": "ended at the turn limit",
                 "max_tokens": "ended at the dialogue's token limit", "player_ended": "ended by the person playing", "error": "failed with an error",
                 "failed": "failed with an error", "cancelled": "were stopped before the end"}


def outcomes_text(outcomes: list[str]) -> str:
    """'2 dialogues ended at the turn limit, 1 ended with the user saying goodbye' for a list of outcomes."""
    parts = []
    for i, outcome in enumerate(dict.fromkeys(outcomes)):
        n = outcomes.count(outcome)
        noun = ("dialogue" if n == 1 else "dialogues") + " " if i == 0 else ""
        words = OUTCOME_WORDS.get(outcome, f"ended as {outcome or 'unknown'}")
        if n == 1 and words.startswith("were "):
            words = "was " + words[len("were "):]
        parts.append(f"{n} {noun}{words}")
    return ", ".join(parts) if parts else "no dialogues ran"


# ------------------------------------------------------------------------ score tables (Benchmark, Experiments)
BREAKDOWN_HEADERS = ["group", "score", "success", "failure", "n", "errors", "95% CI"]


def number_text(x: Optional[float], digits: int = 1) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def ci_text(row: dict[str, Any]) -> str:
    lo, hi = row.get("ci_low"), row.get("ci_high")
    return "—" if lo is None or hi is None else f"{lo:.1f}–{hi:.1f}"


def breakdown_tables(data: dict[str, list[dict[str, Any]]]) -> tuple[list[list[Any]], list[list[Any]]]:
    """(by hidden need, by personality) rows (BREAKDOWN_HEADERS) from trainer.benchmarking.eval_runs.breakdown."""
    def rows(items: list[dict[str, Any]]) -> list[list[Any]]:
        return [[i.get("label") or i.get("key"), number_text(i.get("score")), i.get("success"), i.get("failure"), i.get("n"),
                 i.get("n_errors", 0), ci_text(i)] for i in items]

    return rows(data.get("need", [])), rows(data.get("personality", []))


PROGRESS_BAR = re.compile(r"\d+%\|[^|]*\|")  # tqdm's bar: 'Loading weights: 100%|#####| 272/272 [...]'


def readable_log(tail: str, max_lines: int = 0) -> str:
    """A job's log tail as a person reads it: each line as last drawn (after its final carriage return),
    progress bars (weight loading, downloads) left out and counted once; the last `max_lines` (0: all)."""
    kept, bars = [], 0
    for line in (tail or "").split("\n"):  # not splitlines(): a carriage return redraws a line
        shown = line.rsplit("\r", 1)[-1]
        if PROGRESS_BAR.search(shown):
            bars += 1
        elif shown.strip():
            kept.append(shown)
    kept = kept[-max_lines:] if max_lines else kept
    return "\n".join(kept + ([f"({bars} progress bar line{'s' if bars != 1 else ''} left out)"] if bars else []))
