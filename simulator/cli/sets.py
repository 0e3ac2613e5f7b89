"""`python -m simulator personas sets ...`: stored persona sets (simulator.personas.sets).

    sets list [--json]
    sets show NAME [--json]
    sets create NAME [--need K] [--personality K] [--language L] [--split TAG] [--search TEXT] [--ids A,B]
                     [--generation G]
    sets split NAME [--fraction 0.8] [--seed S]
    sets export NAME FILE [--format lab|rlver|sage]
    sets coverage NAME [--by-language] [--json]

Errors name the option and exit with status 2 (an unknown set, a taken name, a bad fraction ...).
"""
from __future__ import annotations

import argparse
import json
import sys

from simulator.personas.profile import LANGUAGES, NEED_CATEGORIES, PERSONALITIES

# SetError.field -> the option that sets it
OPTION_OF = {"name": "NAME", "ids": "--ids", "generation": "--generation", "fraction": "--fraction",
             "seed": "--seed", "format": "--format", "members": "the filters"}


def add_arguments(sets: argparse.ArgumentParser) -> None:
    acts = sets.add_subparsers(dest="set_action", required=True)
    lst = acts.add_parser("list", help="name, size, hash and source of every stored set")
    show = acts.add_parser("show", help="a set's members and how it was made")
    show.add_argument("name")
    create = acts.add_parser("create", help="a set of the stored personas matching the filters")
    create.add_argument("name")
    create.add_argument("--need", choices=tuple(NEED_CATEGORIES), default="", help="hidden-need category")
    create.add_argument("--personality", choices=tuple(PERSONALITIES), default="")
    create.add_argument("--language", choices=LANGUAGES, default="")
    create.add_argument("--split", default="", metavar="TAG", help="the split tag of extra.split (train, heldout)")
    create.add_argument("--search", default="", metavar="TEXT", help="text in any field")
    create.add_argument("--ids", default="", metavar="ID,ID", help="these personas, in this order")
    create.add_argument("--generation", default="", metavar="G",
                        help="the personas of a generation (extra.generation_id); no other filter")
    split = acts.add_parser("split", help="stratified NAME-train / NAME-heldout (need x personality)")
    split.add_argument("name")
    split.add_argument("--fraction", type=float, default=0.8, help="share for NAME-train (default 0.8)")
    split.add_argument("--seed", type=int, default=0)
    exp = acts.add_parser("export", help="write the set's profiles to a JSONL file")
    exp.add_argument("name")
    exp.add_argument("file")
    exp.add_argument("--format", choices=("lab", "rlver", "sage"), default="lab")
    cov = acts.add_parser("coverage", help="need x personality counts, empty cells listed")
    cov.add_argument("name")
    cov.add_argument("--by-language", action="store_true", help="one matrix per language")
    for a in (lst, show, cov):
        a.add_argument("--json", action="store_true")
    for a in (lst, show, create, split, exp, cov):
        a.add_argument("--db", default=None, help="SQLAlchemy URL (default: RLVER_LAB_DB or the lab's SQLite file)")


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from simulator.personas import sets as persona_sets
    from simulator.personas.specs import PersonaSpecError
    from simulator.personas.store import open_store

    store = open_store(args.db)
    try:
        return _dispatch(store, args)
    except persona_sets.SetError as e:
        return _fail(f"{OPTION_OF.get(e.field, e.field)}: {e.problem}")
    except PersonaSpecError as e:
        return _fail(f"NAME: {e}")
    except ValueError as e:  # an export the format refuses
        return _fail(f"{getattr(args, 'file', '')}: not written: {e}")
    finally:
        store.dispose()


def _dispatch(store, args: argparse.Namespace) -> int:
    from simulator.personas import sets as persona_sets
    from simulator.personas.coverage import coverage, format_coverage
    from simulator.personas.store import summary_row

    act = args.set_action
    if act == "list":
        sets = persona_sets.list_sets(store)
        for s in sets:
            if args.json:
                print(json.dumps(s.to_dict(), ensure_ascii=False))
            else:
                flag = " (members changed since made)" if s.changed else ""
                print(f"{s.name:<32} {s.size:>5}  {s.current_hash or '-':<16}  {s.source_kind}{flag}")
        print(f"{len(sets)} set(s)", file=sys.stderr)
        return 0
    if act == "create":
        if args.generation:
            if any((args.need, args.personality, args.language, args.split, args.search, args.ids)):
                return _fail("--generation: cannot be combined with other filters")
            s = persona_sets.create_from_generation(store, args.name, args.generation)
        else:
            ids = [i.strip() for i in args.ids.split(",") if i.strip()]
            s = persona_sets.create_from_filters(store, args.name, need=args.need, personality=args.personality,
                                                 language=args.language, split=args.split, search=args.search, ids=ids)
        print(f"created set {s.name}: {s.size} persona(s), hash {s.content_hash}")
        return 0
    if act == "split":
        train, heldout = persona_sets.split_set(store, args.name, args.fraction, args.seed)
        for s in (train, heldout):
            print(f"created set {s.name}: {s.size} persona(s), hash {s.content_hash}")
        return 0
    if act == "export":
        n = persona_sets.export_set(store, args.name, args.file, args.format)
        print(f"{args.file}: exported {n} profile(s) of set {args.name} ({args.format} format)")
        return 0
    if act == "coverage":
        cov = coverage(persona_sets.set_profiles(store, args.name), by_language=args.by_language)
        print(json.dumps(cov.to_dict()) if args.json else format_coverage(cov))
        return 0
    s = persona_sets.set_summary(store, args.name)  # show
    members = persona_sets.set_profiles(store, args.name) if not s.missing else []
    if args.json:
        print(json.dumps({**s.to_dict(), "members": [summary_row(p) for p in members]}, ensure_ascii=False))
        return 0
    print(f"{s.name}: {s.size} persona(s), source {s.source_kind} {json.dumps(s.params, ensure_ascii=False)}")
    print(f"hash {s.content_hash} when made, {s.current_hash or '- (members deleted)'} now; created {s.created_at}")
    for p in members:
        print(f"  {p.id:<24} {p.need_category:<20} {p.personality:<9} {p.language}")
    if s.missing:
        print(f"  deleted since: {', '.join(s.missing)}")
    return 0
