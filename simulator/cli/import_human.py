"""`python -m simulator import-human FILE --format esconv|jsonl [--name NAME] [--version V | --add] [--keep-valid]
[--db URL] [--json]`: store a human-played corpus (simulator.evaluation.human_corpora) as the human set `human:NAME`.

All or nothing by default: one bad conversation and nothing is stored, each bad one named on stderr (exit 1);
--keep-valid stores the good ones (those before a truncation too) and names the rest. Conversations already in
the set are skipped; a corrected release is refused unless stored as a new version (--version V: the set
human:NAME@V). The line printed says what was stored: dialogues, turns, people's ratings, pre/post pairs.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the corpus file (ESConv's JSON, or the lab's human JSONL)")
    parser.add_argument("--format", required=True, choices=("esconv", "jsonl"))
    parser.add_argument("--name", default=None, help="the set's name (default: the format, e.g. esconv)")
    parser.add_argument("--keep-valid", action="store_true", help="store the good conversations, name the bad")
    parser.add_argument("--version", default="", metavar="V",
                        help="store the file as a new version of the set, human:NAME@V (a corrected release)")
    parser.add_argument("--add", action="store_true",
                        help="the file's conversations the set lacks are new ones, not corrections: add them")
    parser.add_argument("--db", default=None, help="the store (SQLAlchemy URL; default the lab's)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def run(args: argparse.Namespace) -> int:
    from simulator.evaluation.human_corpora import import_corpus
    from simulator.evaluation.ratings import decode_text
    from storage import make_store

    try:
        text = decode_text(Path(args.file).read_bytes(), args.file)
        report = import_corpus(make_store(args.db), text, args.format, args.name or args.format,
                               keep_valid=args.keep_valid, file_name=Path(args.file).name, version=args.version,
                               add_new=args.add)
    except (OSError, ValueError) as exc:
        print(f"import-human: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({**report.counts(), "dialogue_ids": report.dialogue_ids,
                          "duplicates": report.duplicates, "errors": report.errors}))
    for error in report.errors:
        print(error, file=sys.stderr)
    if report.errors and not report.dialogue_ids and not args.keep_valid:
        print(f"import-human: nothing stored: {len(report.errors)} bad conversation(s)", file=sys.stderr)
        return 1
    if not args.json:
        print(report.summary())
    return 1 if report.errors and not args.keep_valid else 0
