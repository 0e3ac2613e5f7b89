"""Command line: `python -m simulator score|personas|transcripts|probe|chat ...`.

    python -m simulator score FILE [--json]
    python -m simulator personas import FILE [--keep-valid] [--replace] [--as-set NAME] [--db URL]
    python -m simulator personas export FILE [--format lab|rlver] [--db URL]
    python -m simulator personas seed [--db URL]
    python -m simulator personas list [--set SPEC] [--json] [--db URL]
    python -m simulator personas lint (FILE | --set builtin[:train|:heldout]) [--json]   (simulator.cli.lint)
    python -m simulator personas sets list|show|create|split|export|coverage ...   (simulator.cli.sets)
    python -m simulator personas generate --spec FILE --base-url URL --model NAME [...]   (simulator.cli.generate)
    python -m simulator transcripts import FILE [--keep-valid] [--db URL]
    python -m simulator probe ...   (simulator.evaluation.probes)
    python -m simulator chat ...    (simulator.cli.chat)
    python -m simulator prompt render < REQUEST.json   (simulator.cli.prompt)
    python -m simulator fidelity FILE|--eval-run N|--job J [--step S] [--db URL] [--json]   (simulator.evaluation.fidelity)
    python -m simulator agreement --ratings FILE|--db URL|--set human:NAME [--json]   (simulator.cli.agreement)
    python -m simulator import-human FILE --format esconv|jsonl [--name NAME] [--keep-valid]   (simulator.cli.import_human)
    python -m simulator calibrate --set human:NAME --simulator SPEC --name CAL   (simulator.cli.calibrate)

A bad file exits with status 1 and one line per problem on stderr ("line N: field: reason"). `personas
export` and `personas list` on a store with no profiles seed the built-in ones first, as the app does.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Optional, Sequence

# Subcommands living in their own modules, imported only when called: each module exposes
# add_arguments(parser) and run(args) -> int.
PLUGINS = {"probe": ("simulator.evaluation.probes", "probe the simulated user with scripted replies"),
           "chat": ("simulator.cli.chat", "chat with a simulated user in the terminal"),
           "prompt": ("simulator.cli.prompt", "render the exact messages of a simulator step (prompt packs)"),
           "fidelity": ("simulator.evaluation.fidelity", "emotion changes of dialogues vs the published DeepSeek-V3 ones"),
           "agreement": ("simulator.cli.agreement", "the simulated user's emotion changes against human ratings"),
           "import-human": ("simulator.cli.import_human", "store a human-played corpus (ESConv, JSONL) as human:NAME"),
           "calibrate": ("simulator.cli.calibrate", "fit a simulator's emotion changes to a human set's ratings")}
# every command of `python -m simulator` (rlver-lab routes these names here)
COMMANDS = ("score", "personas", "transcripts", *PLUGINS)


def _fail(lines: Sequence[str], code: int = 1) -> int:
    for line in lines:
        print(line, file=sys.stderr)
    return code


def cmd_score(args: argparse.Namespace) -> int:
    from simulator.evaluation.scoring import format_summary
    from simulator.evaluation.transcripts import summarize_file
    from simulator.personas.io import BadFileError

    try:
        s = summarize_file(args.file, n_boot=args.n_boot, seed=args.seed)
    except BadFileError as e:
        return _fail([f"{args.file}: {len(e.errors)} problem(s)"] + [str(x) for x in e.errors])
    except ValueError as e:
        return _fail([f"{args.file}: {e}"])
    if args.json:
        keys = ("score", "success", "failure", "n", "ci_low", "ci_high", "n_errors")
        print(json.dumps({k: getattr(s, k) for k in keys}))
    else:
        print(format_summary(s, args.file))
    return 0


def _store(args: argparse.Namespace):
    from storage import make_store

    return make_store(args.db)


def cmd_personas(args: argparse.Namespace) -> int:
    from simulator.personas import store as persona_store

    store = persona_store.open_store(args.db) if args.action in ("export", "list") else _store(args)
    if args.action == "list":
        return _list_personas(store, args.set, args.json)
    if args.action == "import":
        report = persona_store.import_file(store, args.file, keep_valid=args.keep_valid, replace=args.replace)
        if report.errors:
            what = "stored the valid lines" if report.stored else "nothing stored"
            return _fail([f"{args.file}: {len(report.errors)} problem(s), {what} "
                          f"({report.stored} of {report.n_lines} line(s))"] + [str(e) for e in report.errors])
        print(f"{args.file}: imported {report.stored} profile(s)" +
              (f" ({report.replaced} replaced)" if report.replaced else ""))
        if args.as_set:
            from simulator.personas.sets import SetError, create_from_import

            try:
                made = create_from_import(store, args.as_set, args.file, [p.id for p in report.profiles])
            except SetError as e:
                return _fail([f"--as-set: {e.problem} (the profiles are imported; no set was made)"])
            print(f"created set {made.name}: {made.size} persona(s), hash {made.content_hash}")
        return 0
    if args.action == "export":
        try:
            n = persona_store.export_file(store, args.file, fmt=args.format)
        except ValueError as e:
            return _fail([f"{args.file}: not written: {e}"])
        print(f"{args.file}: exported {n} profile(s) ({args.format} format)")
        return 0
    n = persona_store.seed_builtin(store)
    print(f"seeded {n} built-in profile(s); {persona_store.count_profiles(store)} in the store")
    return 0


def _list_personas(store, spec: Optional[str], as_json: bool) -> int:
    from simulator.personas import store as persona_store
    from simulator.personas.specs import PersonaSpecError, resolve_personas

    try:
        profiles = resolve_personas(spec, store) if spec else persona_store.list_profiles(store)
    except PersonaSpecError as e:
        return _fail([f"--set: {e}"], code=2)
    rows = [persona_store.summary_row(p) for p in profiles]
    if as_json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return 0
    for row in rows:
        print(f"{row['id']:<24} {row['name'][:24]:<24} {row['need_category']:<20} {row['personality']:<9} "
              f"{row['language']:<3} {row['split'] or '-'}")
    print(f"{len(rows)} persona(s)" + (f" in {spec}" if spec else " in the store"), file=sys.stderr)
    return 0
def cmd_personas_lint(args: argparse.Namespace) -> int:
    from simulator.cli.lint import run

    return run(args)


def cmd_transcripts(args: argparse.Namespace) -> int:
    from simulator.evaluation import transcripts
    from simulator.evaluation.scoring import format_summary

    store = _store(args)
    report = transcripts.import_file(store, args.file, keep_valid=args.keep_valid)
    if report.errors:
        return _fail([report.summary()] + ([] if report.dialogue_ids else ["nothing stored"]))
    print(report.summary())
    if report.dialogue_ids or report.duplicates:
        print(format_summary(transcripts.collection_summary(store, report.collection)))
    return 0


def _run_plugin(name: str, argv: Sequence[str]) -> int:
    module_name, help_text = PLUGINS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise
        return _fail([f"'{name}' is unavailable: {module_name} is not installed in this checkout"], code=2)
    parser = argparse.ArgumentParser(prog=f"python -m simulator {name}", description=help_text)
    module.add_arguments(parser)
    return int(module.run(parser.parse_args(list(argv))) or 0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m simulator", description="RLVER Lab simulator tools")
    sub = p.add_subparsers(dest="command", required=True)

    score = sub.add_parser("score", help="Sentient score of a SAGE transcript file (*_result.jsonl)")
    score.add_argument("file")
    score.add_argument("--json", action="store_true", help="one JSON object: score, success, failure, n, ci_low, ci_high")
    score.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples for the 95%% interval")
    score.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    score.set_defaults(func=cmd_score)

    personas = sub.add_parser("personas", help="import / export / seed / list simulated-user profiles")
    actions = personas.add_subparsers(dest="action", required=True)
    imp = actions.add_parser("import", help="import an RLVER/SAGE or lab JSONL file")
    imp.add_argument("file")
    imp.add_argument("--keep-valid", action="store_true", help="store the valid lines even if some are bad")
    imp.add_argument("--replace", action="store_true", help="replace profiles whose id is already stored")
    imp.add_argument("--as-set", default="", metavar="NAME", help="also store the imported profiles as a set")
    exp = actions.add_parser("export", help="write every stored profile to a JSONL file")
    exp.add_argument("file")
    exp.add_argument("--format", choices=("lab", "rlver", "sage"), default="lab")
    seed = actions.add_parser("seed", help="insert the built-in profiles missing from the store")
    lst = actions.add_parser("list", help="list the stored profiles, or those of a persona set")
    lst.add_argument("--set", default=None, metavar="SPEC",
                     help="builtin | builtin:train | builtin:heldout | file:PATH | set:NAME | persona ids "
                          "(default: the store)")
    lst.add_argument("--json", action="store_true", help="one JSON object per persona")
    for a in (imp, exp, seed, lst):
        a.add_argument("--db", default=None, help="SQLAlchemy URL (default: RLVER_LAB_DB or the lab's SQLite file)")
    personas.set_defaults(func=cmd_personas)
    lint = actions.add_parser("lint", help="warnings per profile: leaked hidden need, long first line, missing "
                                           "reactions, style contradictions, language mismatch, near-duplicates")
    which = lint.add_mutually_exclusive_group(required=True)
    which.add_argument("file", nargs="?", help="an RLVER/SAGE or lab JSONL file")
    which.add_argument("--set", metavar="SPEC",
                       help="a persona spec: builtin, builtin:train, builtin:heldout, ids, set:NAME (the lab's "
                            "store)")
    lint.add_argument("--json", action="store_true",
                      help='one JSON object per profile: {"id", "warnings": [{"field", "problem"}]}')
    lint.set_defaults(func=cmd_personas_lint)
    sets = actions.add_parser("sets", help="named persona sets: list, show, create, split, export, coverage")
    from simulator.cli import sets as sets_cli

    sets_cli.add_arguments(sets)
    sets.set_defaults(func=sets_cli.run)
    gen = actions.add_parser("generate", help="write persona candidates with an LLM for review")
    importlib.import_module("simulator.cli.generate").add_arguments(gen)
    gen.set_defaults(func=lambda args: importlib.import_module("simulator.cli.generate").run(args))

    transcripts = sub.add_parser("transcripts", help="import SAGE transcript files into the store")
    tactions = transcripts.add_subparsers(dest="action", required=True)
    timp = tactions.add_parser("import", help="import a *_result.jsonl file as dialogues")
    timp.add_argument("file")
    timp.add_argument("--keep-valid", action="store_true")
    timp.add_argument("--db", default=None)
    transcripts.set_defaults(func=cmd_transcripts)

    for name, (_, help_text) in PLUGINS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    from storage import exit_code
    from storage.db import db_arguments

    argv = db_arguments(list(sys.argv[1:] if argv is None else argv))

    if argv and argv[0] in PLUGINS:
        return exit_code(lambda: _run_plugin(argv[0], argv[1:]))
    args = build_parser().parse_args(argv)
    return exit_code(lambda: args.func(args))


if __name__ == "__main__":
    sys.exit(main())
