"""`python -m app [--host 127.0.0.1] [--port 7860] [--db URL] [--auth-file PATH | --auth user:password]
[--allowed-host NAME ...] [--allow-outside-code] [--allow-path DIR ...] [--endpoint NAME=URL[,KEY_VAR] ...]
[--endpoints-file PATH] [--allow-free-urls] [--behind-proxy [ADDRESSES]] [--max-live-jobs N] [--max-generations N]
[--max-import-conversations N]
[--job-cores N] [--job-memory-gib G] [--max-upload-mb MB] [--jobs local|ray://HEAD:10001|auto --shared-dir PATH]`.

The login comes from --auth-file (a file holding `user:password`), RLVER_LAB_AUTH or --auth, in that
order; --auth is visible to every user of the machine in the process list, the other two are not. A host
other than loopback needs a login (or the explicit --insecure-no-auth): the lab starts training jobs and
shows the store. The password is never printed, and nothing from the store is served before the login.
What a web caller may do (outside code, paths, endpoints and keys, host names) is docs/security.md; the app installs it for its
process and the jobs it starts (simulator.access).
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from pathlib import Path
from typing import Optional

from app.trust import is_loopback

LOOPBACK_PROXIES = "127.0.0.1,::1"  # what a bare --behind-proxy trusts: a proxy on this machine


def parse_auth(value: str) -> tuple[str, str]:
    """'user:password' -> (user, password); the password may itself contain ':'."""
    user, sep, password = value.partition(":")
    if not sep or not user or not password:
        raise ValueError("--auth / RLVER_LAB_AUTH must look like user:password (both non-empty)")
    return user, password


def parse_args(argv: Optional[list[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m app", description="Serve the RLVER Lab web app.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--db", default=None, help="the store: a SQLite file's path or a SQLAlchemy URL (default RLVER_LAB_DB or lab_data/lab.db)")
    p.add_argument("--auth-file", default=None, metavar="PATH",
                   help="require the login user:password read from this file's first line")
    p.add_argument("--auth", default=None, metavar="USER:PASSWORD",
                   help="require this login. Careful: a command-line argument is visible to other users in the "
                        "process list (ps); prefer --auth-file or the RLVER_LAB_AUTH environment variable")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="allow a non-loopback host without a login (anyone who can reach it controls the lab)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a host name the lab answers to besides loopback (repeatable; --host NAME implies it): "
                        "requests naming any other host get 403 (docs/security.md)")
    p.add_argument("--allow-outside-code", action="store_true",
                   help="let web callers run python: simulator and reward specs: every visitor (every logged-in "
                        "user with a login) can then run code on this machine")
    p.add_argument("--allow-path", action="append", default=[], metavar="DIR",
                   help="a folder whose files web callers may name (models, file:, replay:, sage:DIR, "
                        "output_dir; repeatable), besides the lab home and the checkout's data folders")
    p.add_argument("--endpoint", action="append", default=[], metavar="NAME=URL[,KEY_VAR]",
                   help="an OpenAI-compatible endpoint web runs may call, and the environment variable holding its "
                        "key (repeatable). OPENAI_BASE_URL and OPENAI_API_KEY form 'default' unless you name one so")
    p.add_argument("--endpoints-file", default=None, metavar="PATH",
                   help="more endpoints from a YAML file: NAME: URL or NAME: {url: URL, key_var: VAR}")
    p.add_argument("--max-live-jobs", type=int, default=8, metavar="N",
                   help="the most jobs web callers may have queued or running at once (default 8; 0: no ceiling)")
    p.add_argument("--max-generations", type=int, default=1, metavar="N",
                   help="persona generations that may run at once (default 1); more wait their turn")
    p.add_argument("--max-import-conversations", type=int, default=None, metavar="N",
                   help="the most conversations a corpus imported from the web may hold (default 20000; the "
                        "import runs as a job); larger corpora import with python -m simulator import-human")
    p.add_argument("--job-cores", type=int, default=0, metavar="N",
                   help="cores training, benchmark and comparison jobs may use together (default: the machine's); "
                        "a training job takes them all, a benchmark or comparison half (trainer.jobs.admission)")
    p.add_argument("--job-memory-gib", type=float, default=0.0, metavar="G",
                   help="memory those jobs may take together, by their plans (default: the machine's, the GPU's "
                        "with CUDA, less 2 GiB); jobs that fit run side by side, the others wait their turn")
    p.add_argument("--max-upload-mb", type=int, default=100, metavar="MB",
                   help="the largest file a web page may upload (default 100)")
    p.add_argument("--behind-proxy", nargs="?", const=LOOPBACK_PROXIES, default="", metavar="ADDRESSES",
                   help="trust X-Forwarded-* headers (a reverse proxy in front sets them) and take the client "
                        "address from X-Forwarded-For when the request comes from one of ADDRESSES (comma-"
                        f"separated addresses or networks; default {LOOPBACK_PROXIES}); without it they are "
                        "dropped and the client address is the socket's")
    p.add_argument("--allow-free-urls", action="store_true",
                   help="let web callers type an endpoint URL besides the named ones; such a URL never gets a key")
    p.add_argument("--jobs", default=None, metavar="local|ray://HEAD:10001|auto",
                   help="where jobs run: local processes (default) or Ray jobs on a cluster (docs/cluster.md)")
    p.add_argument("--shared-dir", default=None, metavar="PATH",
                   help="job folders and checkpoints here (with --jobs ray: a folder every node sees)")
    args = p.parse_args(argv)
    from simulator.endpoints import EndpointError, owner_endpoints, parse_endpoint, read_endpoints_file

    try:
        given = [parse_endpoint(text) for text in args.endpoint]
        if args.endpoints_file:
            given += read_endpoints_file(args.endpoints_file)
        args.endpoints = owner_endpoints(given)
    except EndpointError as exc:
        p.error(str(exc))
    raw = os.environ.get("RLVER_LAB_AUTH", "")
    if args.auth_file is not None:
        try:
            raw = Path(args.auth_file).read_text(encoding="utf-8").splitlines()[0].strip()
        except (OSError, UnicodeDecodeError, IndexError) as exc:
            p.error(f"cannot read --auth-file {args.auth_file}: {getattr(exc, 'strerror', None) or 'empty file'}")
    elif args.auth is not None:
        raw = args.auth
    try:
        args.auth = parse_auth(raw) if raw else None
    except ValueError as exc:
        p.error(str(exc))
    if not is_loopback(args.host) and args.auth is None and not args.insecure_no_auth:
        p.error(f"refusing to serve on {args.host} without a login: anyone who can reach it could start jobs "
                "and read the store. Give --auth user:password (or RLVER_LAB_AUTH), bind 127.0.0.1, or pass "
                "--insecure-no-auth if you really mean it.")
    missing = [d for d in args.allow_path if not Path(d).expanduser().is_dir()]
    if missing:
        p.error(f"--allow-path {missing[0]}: not a folder")
    try:
        for proxy in filter(None, (a.strip() for a in args.behind_proxy.split(","))):
            ipaddress.ip_network(proxy, strict=False)
    except ValueError as exc:
        p.error(f"--behind-proxy: {exc} (give the proxies' addresses or networks, comma-separated)")
    if args.max_generations < 1:
        p.error(f"--max-generations must be at least 1, got {args.max_generations}")
    if args.max_import_conversations is not None and args.max_import_conversations < 1:
        p.error(f"--max-import-conversations must be at least 1, got {args.max_import_conversations}")
    if args.job_cores < 0 or args.job_memory_gib < 0:
        p.error(f"--job-cores and --job-memory-gib must be positive (0: the machine's), got {args.job_cores} and "
                f"{args.job_memory_gib}")
    if args.max_upload_mb < 1:
        p.error(f"--max-upload-mb must be at least 1, got {args.max_upload_mb}")
    if not 0 < args.port < 65536:
        p.error(f"--port must be in 1..65535, got {args.port}")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    from storage.db import db_arguments

    args = parse_args(db_arguments(list(sys.argv[1:] if argv is None else argv)))
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from app import preflight

    problem = preflight.port_problem(args.host, args.port) or preflight.missing_model_packages()
    if problem:
        return _cannot_start(problem)
    from storage.db import default_url
    from trainer.jobs.backend import BackendError, configure

    try:  # before anything is installed or opened: a SQLite store with ray is refused in one line
        configure(args.jobs, args.shared_dir, args.db or default_url())
    except BackendError as exc:
        return _cannot_start(str(exc))
    from app.context import LabContext
    from app.lab import build_app, launch, startup
    from simulator.access import Access, install
    from storage import StoreError, make_store

    # every spec the web names is judged by this (and so is every job the app starts: it inherits it)
    install(Access.web(logged_in=args.auth is not None, allow_outside_code=args.allow_outside_code,
                       allowed_paths=tuple(args.allow_path), endpoints=args.endpoints,
                       free_urls=args.allow_free_urls, max_live_jobs=max(0, args.max_live_jobs)))

    os.environ["RLVER_LAB_MAX_GENERATIONS"] = str(args.max_generations)  # the jobs it starts read it
    if args.max_import_conversations:  # the People view reads it (trainer.import_jobs.import_bound)
        os.environ["RLVER_LAB_MAX_IMPORT_CONVERSATIONS"] = str(args.max_import_conversations)
    if args.job_cores:
        os.environ["RLVER_LAB_JOB_CORES"] = str(args.job_cores)
    if args.job_memory_gib:
        os.environ["RLVER_LAB_JOB_MEMORY_GIB"] = str(args.job_memory_gib)
    if args.host in ("0.0.0.0", "::") and not args.allowed_host:
        print(f"RLVER Lab: serving on {args.host} but answering only loopback host names: give --allowed-host "
              "NAME for each name or address your team uses (docs/security.md)", flush=True)
    if args.allow_outside_code:
        print("RLVER Lab: --allow-outside-code: every web caller may run python: specs on this machine", flush=True)
    try:
        store = make_store(args.db)
        done = startup(store)
    except StoreError as exc:  # unreachable server, wrong credentials, a schema needing the owner: said already
        return _cannot_start(str(exc))
    except Exception as exc:  # SQLAlchemy / sqlite / OS errors: one line, no traceback
        return _cannot_start(preflight.store_problem_text(args.db or default_url(), exc))
    print(f"RLVER Lab: store ready ({done.get('seeded', 0)} built-in personas added), "
          f"serving http://{args.host}:{args.port}{' with a login' if args.auth else ''}", flush=True)
    # The real URL (password included) goes only to job processes, through their environment; the page and
    # the logs never show it.
    ctx = LabContext(store=store, store_url=store.url.render_as_string(hide_password=False))
    try:
        launch(build_app(ctx), host=args.host, port=args.port, auth=args.auth, extra_hosts=args.allowed_host,
               behind_proxy=args.behind_proxy, max_upload_mb=args.max_upload_mb)
    except OSError as exc:  # the port was taken between the check and the launch
        return _cannot_start(preflight.port_problem(args.host, args.port) or f"cannot serve: {exc}")
    return 0


def _cannot_start(problem: str) -> int:
    print(f"RLVER Lab cannot start: {problem}", file=sys.stderr, flush=True)
    return 2


if __name__ == "__main__":
    sys.exit(main())
