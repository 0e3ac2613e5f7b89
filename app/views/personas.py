"""Personas view: browse, search and filter the profiles; create / edit / duplicate / delete with the problem
shown under the offending field; import and export JSONL files. Logic lives in simulator.personas.store."""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Optional

import gradio as gr

from app.context import LabContext
from app.render import md
from app.services.persona_form import (FIELDS, FORM, NEED_CHOICES, PERSONALITY_CHOICES, early_problems, form_profile,
                                       form_values)
from app.views import persona_generation_panel, persona_preview
from simulator.access import export_path
from simulator.personas import lint
from simulator.personas import store as persona_store
from simulator.personas.profile import DIFFICULTIES, LANGUAGES, Profile, ProfileError
from storage import Store

HEADERS = ["id", "name", "need", "personality", "language", "source", "warnings"]
LINT_MAX = 300  # profiles linted together (list counts, near-duplicates of the form's profile); more: not counted
MAX_LISTED = 200  # problems listed in the import report (the count says how many more)
log = logging.getLogger("rlver.app.personas")


def import_markdown(store: Store, path: Path, keep_valid: bool, replace: bool, max_listed: int = MAX_LISTED) -> str:
    """The import report as the CLI gives it: one line per problem ("line N: field: reason"), the first
    `max_listed` of them shown. An unexpected failure is logged and reported without its exception text."""
    try:
        report = persona_store.import_file(store, path, keep_valid=keep_valid, replace=replace)
    except Exception:
        log.exception("persona import of %s failed", path)
        return "**The import failed unexpectedly; nothing was stored.** The details are in the server log."
    lines = [f"**{report.stored} stored**, {len(report.profiles)} valid, {len(report.errors)} problem(s) "
             f"in {report.n_lines} line(s)."]
    if report.errors and not keep_valid:
        lines.append("Nothing was stored because of the problems below (tick *Keep the valid lines* to store "
                     "the rest).")
    lines += [f"- {md(e)}" for e in report.errors[:max_listed]]
    if len(report.errors) > max_listed:
        lines.append(f"- ... and {len(report.errors) - max_listed} more problem(s)")
    return "\n".join(lines)


def _any(choices: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [("any", "")] + choices


def _row(p: Profile) -> list[str]:
    return [p.id, p.name, p.need_category, p.personality, p.language, p.source]


def rows(store: Store, search: str = "", need: str = "", personality: str = "", language: str = "") -> list[list[str]]:
    profiles = persona_store.list_profiles(store, search or "", need or None, personality or None, language or None)
    return [_row(p) for p in profiles]


def rows_with_warnings(store: Store, search: str = "", need: str = "", personality: str = "",
                       language: str = "") -> list[list[str]]:
    """The listed rows with their lint warnings count (near-duplicates among the listed profiles); the count
    is left empty when more than LINT_MAX profiles are listed."""
    profiles = persona_store.list_profiles(store, search or "", need or None, personality or None, language or None)
    warnings = lint.lint_profiles(profiles) if len(profiles) <= LINT_MAX else {}
    counts = {pid: str(len(ws)) for pid, ws in warnings.items()}
    return [_row(p) + [counts.get(p.id, "")] for p in profiles]


def form_warnings(store: Store, profile: Profile) -> list[lint.LintWarning]:
    """Lint warnings of the profile in the form, near-duplicates looked for in the store (up to LINT_MAX)."""
    stored = [p for p in persona_store.list_profiles(store) if p.id != profile.id]
    return lint.lint_profiles([profile], others=stored if len(stored) <= LINT_MAX else [])[profile.id]


def warnings_markdown(warnings: list[lint.LintWarning]) -> str:
    if not warnings:
        return "Lint: no warnings."
    lines = [f"- ⚠ {md(w.field)}: {md(w.problem)}" for w in warnings]
    return "\n".join([f"**Lint: {len(warnings)} warning(s)**"] + lines)


def _field_errors(errors: dict[str, str]) -> list:
    """One update per form field: the problem under it, or hidden."""
    return [gr.update(value=f"⚠ {md(errors[f])}", visible=True) if f in errors else gr.update(value="", visible=False)
            for f in FIELDS]


def _field(name: str, label: str, kind: str, lines: int):
    """A form input with its error line under it (hidden until save finds a problem in this field)."""
    eid = f"persona-{name.replace('_', '-')}"
    with gr.Column(min_width=200):
        if kind == "lang":
            comp = gr.Dropdown(list(LANGUAGES), value="en", label=label, elem_id=eid)
        elif kind == "difficulty":
            comp = gr.Dropdown(list(DIFFICULTIES), value="standard", label=label, elem_id=eid)
        elif kind == "need":
            comp = gr.Dropdown(NEED_CHOICES, value=None, label=label, elem_id=eid)
        elif kind == "personality":
            comp = gr.Dropdown(PERSONALITY_CHOICES, value=None, label=label, elem_id=eid)
        else:
            comp = gr.Textbox(label=label, lines=lines, max_lines=max(lines, 12), elem_id=eid)
        err = gr.Markdown(visible=False, elem_id=f"err-{name}", elem_classes=["field-error"])
    return comp, err


def build(ctx: LabContext) -> None:
    store = ctx.store
    editing = gr.State(None)  # id of the profile in the form, None = a new one
    with gr.Row():
        with gr.Column(scale=5):
            with gr.Row():
                search = gr.Textbox(label="Search", placeholder="text in any field", scale=2, elem_id="persona-search")
                f_need = gr.Dropdown(_any(NEED_CHOICES), value="", label="Hidden need", scale=2)
                f_pers = gr.Dropdown(_any(PERSONALITY_CHOICES), value="", label="Personality", scale=1,
                                     elem_id="persona-filter-personality")
                f_lang = gr.Dropdown(_any([(x, x) for x in LANGUAGES]), value="", label="Language", scale=1)
            # Filled on every page load (after any login) and tab visit: jobs and the CLI write to the store too.
            table = gr.Dataframe([], headers=HEADERS, datatype="str", type="array", interactive=False,
                                 max_height=520, wrap=True, label="Profiles (click a row to edit)",
                                 elem_id="persona-table")
            count = gr.Markdown("", elem_id="persona-count")
            with gr.Accordion("Import / export", open=False):
                up = gr.File(label="Profile file (RLVER/SAGE or lab JSONL)", file_types=[".jsonl", ".json", ".txt"],
                             type="filepath", elem_id="persona-import-file")
                keep_valid = gr.Checkbox(label="Keep the valid lines when some are bad", value=False)
                replace = gr.Checkbox(label="Replace profiles whose id is already stored", value=False)
                import_btn = gr.Button("Import", elem_id="persona-import")
                import_report = gr.Markdown(elem_id="persona-import-report")
                with gr.Row():
                    fmt = gr.Radio([("lab JSONL", "lab"), ("RLVER/SAGE JSONL", "rlver")], value="lab",
                                   label="Export format")
                    export_btn = gr.Button("Export the listed profiles", elem_id="persona-export")
                export_file = gr.File(label="Exported file", interactive=False, elem_id="persona-export-file")
        with gr.Column(scale=6):
            title = gr.Markdown("### New persona", elem_id="persona-form-title")
            lint_due = gr.State(None)  # a new value asks for the editor's lint (run after the form is shown)
            inputs, errs = [], []
            # id/name, language/difficulty, need/personality side by side; the long texts full width
            for group in [FORM[0:2], FORM[2:4], FORM[4:6]] + [[f] for f in FORM[6:]]:
                with gr.Row():
                    for spec in group:
                        comp, err = _field(*spec)
                        inputs.append(comp)
                        errs.append(err)
            with gr.Row():
                save_btn = gr.Button("Save", variant="primary", elem_id="persona-save")
                new_btn = gr.Button("New", elem_id="persona-new")
                dup_btn = gr.Button("Duplicate", elem_id="persona-duplicate")
                del_btn = gr.Button("Delete", variant="stop", elem_id="persona-delete")
                lint_btn = gr.Button("Check warnings", elem_id="persona-lint")
            lint_md = gr.Markdown("", elem_id="persona-warnings")  # under its button

            persona_preview.build(ctx, editing, inputs)
            with gr.Row(visible=False) as confirm_row:
                gr.Markdown("Delete this persona? Dialogues that used it keep their copy of the id.")
                confirm_btn = gr.Button("Yes, delete", variant="stop", elem_id="persona-delete-confirm")
                cancel_btn = gr.Button("Keep it")
            status = gr.Markdown(elem_id="persona-status")

    id_box = inputs[0]
    filters = [search, f_need, f_pers, f_lang]
    from app.views import persona_sets_panel

    sets_refresh = persona_sets_panel.build(ctx, filters)

    # The list and the form show at once; their lint warnings (which may wait for the sentence model) follow
    # in a second event, asked for through the counts_due / lint_due states.
    def refresh(s, n, p, l):
        data = [row + [""] for row in rows(store, s, n, p, l)]
        total = persona_store.count_profiles(store)
        return data, f"{len(data)} of {total} profiles", time.time()

    def fill_counts(s, n, p, l):
        return rows_with_warnings(store, s, n, p, l)

    def lint_stored(profile_id: Optional[str]):
        p = persona_store.get_profile(store, profile_id) if profile_id else None
        return warnings_markdown(form_warnings(store, p)) if p else ""

    def load(profile_id: Optional[str]):
        p = persona_store.get_profile(store, profile_id) if profile_id else None
        head = f"### Editing **{md(p.id)}**" if p else "### New persona"
        return [p.id if p else None, head, gr.update(interactive=p is None)] + form_values(p) + \
            ["Lint: checking…" if p else "", time.time()] + _field_errors({})

    form_out = [editing, title, id_box] + inputs + [lint_md, lint_due] + errs

    def on_select(evt: gr.SelectData):
        row = evt.row_value or []
        return load(row[0] if row else None) + [gr.update(visible=False), ""]

    def on_save(editing_id, *values_and_filters):
        values = dict(zip(FIELDS, values_and_filters[:len(FIELDS)]))
        original = persona_store.get_profile(store, editing_id) if editing_id else None
        try:
            profile = form_profile(values, original)
            persona_store.save_profile(store, profile, create=editing_id is None)
        except ProfileError as exc:
            others = {k: v for k, v in exc.errors.items() if k not in FIELDS}
            msg = f"**Not saved.** Fix the {len(exc.errors)} field(s) marked ⚠ above." + "".join(f"  \n{md(k)}: {md(v)}" for k, v in others.items())
            return [gr.update()] * (len(form_out) - len(errs)) + _field_errors(exc.errors) + [msg] + \
                [gr.update()] * len(list_out)
        return load(profile.id) + [f"Saved **{md(profile.id)}** ({md(profile.name)}).",
                                   *refresh(*values_and_filters[len(FIELDS):])]

    def on_duplicate(editing_id, *flt):
        if not editing_id:
            return [gr.update()] * len(form_out) + ["Pick a stored persona to duplicate."] + \
                [gr.update()] * len(list_out)
        copy = persona_store.duplicate_profile(store, editing_id)
        return load(copy.id) + [f"Duplicated as **{md(copy.id)}**; edit and save.", *refresh(*flt)]

    def on_delete(editing_id, *flt):
        if not editing_id:
            return load(None) + ["Nothing selected.", *refresh(*flt)]
        ok = persona_store.delete_profile(store, editing_id)
        return load(None) + [f"Deleted **{md(editing_id)}**." if ok else f"**{md(editing_id)}** was already gone.",
                             *refresh(*flt)]

    def on_lint(editing_id, *values):
        original = persona_store.get_profile(store, editing_id) if editing_id else None
        return warnings_markdown(form_warnings(store, form_profile(dict(zip(FIELDS, values)), original)))

    def on_import(path, keep, repl, *flt):
        if not path:
            return "Choose a file first.", *refresh(*flt)
        return import_markdown(store, Path(path), bool(keep), bool(repl)), *refresh(*flt)

    def on_export(f, *flt):
        ids = [r[0] for r in rows(store, *flt)]
        out = export_path("personas", f)
        try:
            persona_store.export_file(store, out, fmt=f, ids=ids)
        except ValueError as exc:  # profiles stored before the bounds: named, never a traceback
            raise gr.Error(f"Not exported: {exc}"[:2000]) from None
        return str(out)

    counts_due = gr.State(None)  # a new value asks for the warnings column of the listed rows
    list_out = [table, count, counts_due]
    ctx.refresh_on_show(refresh, filters, list_out)
    for comp in filters:
        (comp.submit if comp is search else comp.change)(refresh, filters, list_out)
    search.change(refresh, filters, list_out)
    table.select(on_select, None, form_out + [confirm_row, status])
    def on_leave(name: str, *values):
        problem = early_problems(dict(zip(FIELDS, values)), (name,)).get(name)
        return gr.update(value=f"⚠ {md(problem)}", visible=True) if problem else gr.update(value="", visible=False)

    for name in ("id", "name"):  # the import's rules, under the field as soon as it is left
        at = FIELDS.index(name)
        inputs[at].blur(lambda *v, n=name: on_leave(n, *v), inputs, errs[at])
    save_btn.click(on_save, [editing] + inputs + filters, form_out + [status] + list_out)
    new_btn.click(lambda: load(None) + [""], None, form_out + [status])
    dup_btn.click(on_duplicate, [editing] + filters, form_out + [status] + list_out)
    del_btn.click(lambda e: (gr.update(visible=bool(e)), "" if e else "Pick a stored persona to delete."),
                  [editing], [confirm_row, status])
    cancel_btn.click(lambda: gr.update(visible=False), None, confirm_row)
    confirm_btn.click(on_delete, [editing] + filters, form_out + [status] + list_out).then(
        lambda: gr.update(visible=False), None, confirm_row)
    lint_btn.click(on_lint, [editing] + inputs, lint_md)
    lint_due.change(lint_stored, [editing], lint_md)
    counts_due.change(fill_counts, filters, table)
    import_btn.click(on_import, [up, keep_valid, replace] + filters, [import_report] + list_out)
    export_btn.click(on_export, [fmt] + filters, export_file)
    persona_generation_panel.build(ctx, inputs, editing, title, (refresh, filters, list_out), sets_refresh)
