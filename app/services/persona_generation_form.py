"""The Personas view's Generate panel without Gradio: its form read into a spec and endpoint settings (each
problem named by its field), the progress bar, the review table and a candidate's details."""
from __future__ import annotations

import math
import re
from typing import Any, Optional

from app.render import md, text
from simulator.access import current_access
from simulator.personas.generation import GenerationSpec, SpecError, spec_from_dict

HEADERS = ["candidate", "slot", "name", "need", "personality", "status", "lint warnings", "similarity", "nearest"]
FORM_FIELDS = ("count", "needs", "personalities", "languages", "topics", "seed", "base_url", "model", "threshold")


def _whole(value: Any) -> Any:
    """A gr.Number's float as an int when it is whole (the spec checks the rest)."""
    return int(value) if isinstance(value, float) and math.isfinite(value) and value == int(value) else value


def read_form(values: dict[str, Any]) -> tuple[Optional[GenerationSpec], dict[str, Any], dict[str, str]]:
    """(spec, endpoint settings, {field: problem}) from the panel's values; spec is None when any problem."""
    errs: dict[str, str] = {}
    data: dict[str, Any] = {"count": _whole(values.get("count")), "seed": _whole(values.get("seed") or 0)}
    for key in ("needs", "personalities", "languages"):
        if values.get(key):
            data[key] = list(values[key])
    topics = [t.strip() for t in str(values.get("topics") or "").splitlines() if t.strip()]
    if topics:
        data["topics"] = topics
    spec = None
    try:
        spec = spec_from_dict(data)
    except SpecError as e:
        for key, problem in e.errors.items():  # "needs[1]" -> the needs field, the item named in the text
            field = re.split(r"[\[.]", key)[0]
            errs[field] = problem if field == key else f"{key}: {problem}"
    base_url, model = str(values.get("base_url") or "").strip(), str(values.get("model") or "").strip()
    if "count" not in errs and (problem := current_access().bound_error("count", data.get("count"))):
        errs["count"] = problem
    if problem := current_access().endpoint_error("base_url", base_url):  # an owner's endpoint (simulator.endpoints)
        errs["base_url"] = problem
    if not model:
        errs["model"] = "is required: the model name at the endpoint"
    threshold = values.get("threshold")
    if not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
        errs["threshold"] = f"must be a number in (0, 1], got {threshold!r}"
    settings = {"base_url": base_url, "model": model, "threshold": threshold}
    return (None if errs else spec), settings, errs


def errors_markdown(errs: dict[str, str]) -> str:
    return "**Not started.** " + "".join(f"  \n⚠ {md(k)}: {md(v)}" for k, v in errs.items())


def progress_html(g: Optional[dict[str, Any]]) -> str:
    """A progress bar and a line: done of planned, the status and the counts per status."""
    if not g:
        return "<div id='gen-progress-text'>No generation yet.</div>"
    counts = ", ".join(f"{n} {k}" for k, n in g["counts"].items() if n) or "no candidates yet"
    err = f" — {text(g['error'])}" if g.get("error") else ""
    return (f"<progress max='{g['n_planned']}' value='{g['n_done']}' style='width:100%'></progress>"
            f"<div id='gen-progress-text'>Generation {g['id']}: {g['n_done']} of {g['n_planned']} "
            f"({text(g['status'])}): {text(counts)}; dedupe threshold "
            f"{float(g['settings'].get('threshold', 0)):.2f}{err}</div>")


def candidate_rows(cands: list[dict[str, Any]]) -> list[list[Any]]:
    return [[c["id"], c["slot"], c["profile"].get("name", ""), c["plan"].get("need_category", ""),
             c["plan"].get("personality", ""), c["status"], c["lint_warnings"],
             "" if c["similarity"] is None else f"{c['similarity']:.2f}", c["nearest_id"]] for c in cands]


def candidate_markdown(c: Optional[dict[str, Any]]) -> str:
    """What the selected candidate says, with its problem, warnings and nearest persona."""
    if not c:
        return "Pick a candidate in the table."
    p = c["profile"]
    lines = [f"**Candidate {c['id']}** (slot {c['slot']}): **{md(c['status'])}**"
             + (f", accepted as **{md(c['persona_id'])}**" if c["persona_id"] else "")]
    if c["validation_error"]:
        lines.append(f"⚠ {md(c['validation_error'])}")
    if c["similarity"] is not None:
        lines.append(f"Nearest persona: {md(c['nearest_id'])} (similarity {c['similarity']:.2f})")
    lines += [f"- ⚠ {md(w.get('field'))}: {md(w.get('problem'))}" for w in c.get("lint") or []]
    for key in ("name", "persona", "background", "hidden_need", "first_line"):
        if p.get(key):
            lines.append(f"**{key}**: {md(p[key])}")
    if p.get("traits"):
        lines.append(f"**traits**: {md(', '.join(map(str, p['traits'])))}")
    return "  \n".join(lines)


def set_from_generation(store: Any, name: str, generation_id: Optional[int]) -> str:
    """Save a generation's accepted personas as a named persona set; the message the panel shows."""
    from simulator.personas import sets as persona_sets

    if not generation_id:
        return "**No set made.** generation: generate first."
    try:
        s = persona_sets.create_from_generation(store, name, generation_id)
    except persona_sets.SetError as exc:
        return f"**No set made.** {md(exc.field)}: {md(exc.problem)}"
    return (f"Created set **{md(s.name)}** from generation {generation_id}: {s.size} accepted persona(s), "
            f"hash `{s.content_hash}`.")
