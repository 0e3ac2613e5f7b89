"""A human-played corpus imported as a job (kind "import"): its own process, like every job (the owner lock,
heartbeat, Cancel, resume; trainer.jobs.queue), so a large file never runs inside the app's process.

    job_id = create_import_job(store, path, settings)    # copies the file into the job's folder; nothing runs
    job_queue.launch(store_url, job_id)                   # `python -m trainer job ID` -> run_import_job

The job reads the copy in its folder (an upload may be cleaned away meanwhile) through
simulator.evaluation.human_corpora.import_corpus, refusing a file of more than `max_conversations`
conversations (the bound its starter recorded; 0: none). Progress: the conversations read, then the stage
"storing" while the rows are written in one transaction (nothing else is written to the store then: SQLite has
one writer); Cancel stops it at the next 200 conversations with nothing stored. What it stored (or why nothing)
is recorded in the job's config under "result"; a refusal ends the job failed, its error the reason.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from simulator.evaluation.human_corpora import FORMATS, check_name, import_corpus
from simulator.evaluation.ratings import decode_text
from trainer.jobs.control import cancel
from trainer.jobs.queue import JobError, create_job, job_dir

IMPORT_JOB_KIND = "import"
MAX_CONVERSATIONS_ENV = "RLVER_LAB_MAX_IMPORT_CONVERSATIONS"  # `python -m app --max-import-conversations N` sets it
DEFAULT_MAX_CONVERSATIONS = 20_000  # a web import's bound; ESConv's whole release is about 1,300
INPUT_NAME = "corpus.input"  # the job's copy of the file, in its folder
SETTINGS = ("format", "name", "keep_valid", "version", "add", "max_conversations", "bound")
SHOWN_ERRORS = 50  # bad conversations recorded in the job's result (all are counted)


def import_bound() -> int:
    """The most conversations an import started from the web takes (the owner's setting, else the default)."""
    text = os.environ.get(MAX_CONVERSATIONS_ENV, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_MAX_CONVERSATIONS


def create_import_job(store: Any, path: str | Path, settings: dict[str, Any]) -> int:
    """Check the settings (ValueError naming the field; nothing recorded), record a queued import job and copy
    the file into its folder. JobError at the owner's ceiling of live jobs."""
    fmt, name, version = settings.get("format"), (settings.get("name") or "").strip(), settings.get("version") or ""
    if fmt not in FORMATS:
        raise ValueError(f"format: one of {', '.join(FORMATS)}, got {fmt!r}")
    check_name(name or fmt, "name")
    if version:
        check_name(version, "version")
    source = Path(path)
    if not source.is_file():
        raise ValueError(f"file: {source.name} cannot be read (upload it again)")
    config = {**{k: settings[k] for k in SETTINGS if k in settings}, "name": name or fmt, "file_name": source.name,
              "bytes": source.stat().st_size}
    job_id = create_job(store, IMPORT_JOB_KIND, config, name=f"import {source.name} -> human:{name or fmt}"[:200])
    try:
        shutil.copyfile(source, job_dir(store, job_id) / INPUT_NAME)
    except OSError as exc:
        cancel(store, job_id)
        raise JobError(f"file: could not be copied for the import job ({exc.strerror or exc})") from None
    return job_id


def run_import_job(store: Any, ctx: Any) -> dict[str, Any]:
    """The work of an import job (`ctx` a JobContext)."""
    c, stage = ctx.config, {"now": ""}

    def progress(name: str, count: int) -> None:
        ctx.check_cancelled()
        if stage["now"] != name:
            stage["now"] = name
            ctx.record_config("stage", name)
        ctx.progress(count, 0)

    text = decode_text((Path(ctx.output_dir) / INPUT_NAME).read_bytes(), c["file_name"])
    report = import_corpus(store, text, c["format"], c["name"], keep_valid=bool(c.get("keep_valid")),
                           file_name=c["file_name"], version=c.get("version") or "", add_new=bool(c.get("add")),
                           max_conversations=int(c.get("max_conversations") or 0), bound=c.get("bound") or "",
                           progress=progress, check=ctx.check_cancelled)
    counts = report.counts()
    ctx.record_config("result", {**counts, "errors": report.errors[:SHOWN_ERRORS]})
    ctx.record_config("stage", "done")
    ctx.progress(counts["imported"], counts["imported"])
    if report.errors and not c.get("keep_valid"):
        raise ValueError(f"nothing stored: {len(report.errors)} bad conversation(s), the first {report.errors[0]}")
    print(report.summary()[:2000], flush=True)
    return counts
