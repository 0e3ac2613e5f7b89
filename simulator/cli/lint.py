"""`python -m simulator personas lint (FILE | --set SPEC) [--json]`: the persona lint (simulator.personas.lint)
of a profile file or a persona spec, as a table or one JSON object per profile.

A file's RLVER/SAGE lines are reported with their own field names (player, first_talk, ...); its bad lines
are listed on stderr and its valid profiles still linted.
"""
from __future__ import annotations

import json
import sys

from simulator.personas.io import detect_format, import_profiles, read_jsonl
from simulator.personas.lint import lint_profiles
from simulator.personas.profile import Profile
from simulator.personas.specs import PersonaSpecError, resolve_personas


def load_set(spec: str) -> list[Profile]:
    """The profiles of a persona spec (simulator.personas.specs: builtin, builtin:train, ids, file:PATH)."""
    try:
        return resolve_personas(spec)
    except PersonaSpecError as e:
        raise ValueError(f"--set: {e}") from e


def load_file(path: str) -> tuple[list[tuple[Profile, str]], list[str]]:
    """(profile, its line's format "lab"|"rlver") for each valid line of a profile file, and one message per
    bad line ("line N: field: reason")."""
    report = import_profiles(path)
    fmt_of_line = {n: detect_format(r) for n, r in read_jsonl(path)[0]}
    return ([(p, fmt_of_line.get(report.line_of.get(p.id, 0), "lab")) for p in report.profiles],
            [str(e) for e in report.errors])


def format_table(results: list[dict]) -> str:
    """The readable report: one row per warning (id, field, problem), then a count."""
    rows = [(r["id"], w["field"], w["problem"]) for r in results for w in r["warnings"]]
    if rows:
        wid = min(40, max(len("id"), *(len(r[0]) for r in rows)))
        wf = max(len("field"), *(len(r[1]) for r in rows))
        lines = [f"{'id':<{wid}}  {'field':<{wf}}  problem"]
        lines += [f"{i[:wid]:<{wid}}  {f:<{wf}}  {p}" for i, f, p in rows]
    else:
        lines = []
    warned = sum(1 for r in results if r["warnings"])
    lines.append(f"{len(results)} profile(s), {len(rows)} warning(s) in {warned} profile(s)")
    return "\n".join(lines)


def run(args) -> int:
    """`personas lint (FILE | --set NAME) [--json]`: exit 0 (warnings are not errors), 1 when the file has
    bad lines (listed on stderr; its valid profiles are still linted) or cannot be read, 2 for a bad --set."""
    errors: list[str] = []
    if args.set:
        try:
            loaded = [(p, "lab") for p in load_set(args.set)]
        except ValueError as e:
            print(e, file=sys.stderr)
            return 2
    else:
        loaded, errors = load_file(args.file)
    warnings = lint_profiles([p for p, _ in loaded])
    results = [{"id": p.id, "warnings": [w.to_dict(fmt) for w in warnings[p.id]]} for p, fmt in loaded]
    if args.json:
        for r in results:
            print(json.dumps(r, ensure_ascii=False))
    else:
        print(format_table(results))
    if errors:
        what = "only the valid lines were linted" if loaded else "nothing linted"
        print(f"{args.file}: {len(errors)} problem(s); {what}", file=sys.stderr)
        for line in errors:
            print(line, file=sys.stderr)
    return 1 if errors else 0
