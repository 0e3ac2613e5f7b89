"""`python -m app [--host 127.0.0.1] [--port 7860] [--db URL] [--auth user:password]`: serve the lab.

The login may also come from RLVER_LAB_AUTH. A host other than loopback needs a login (or the explicit
--insecure-no-auth): the lab starts training jobs and shows the store. The password is never printed.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from typing import Optional


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
    p.add_argument("--db", default=None, help="SQLAlchemy URL of the store (default RLVER_LAB_DB or lab_data/lab.db)")
    p.add_argument("--auth", default=None, metavar="USER:PASSWORD", help="require this login (or RLVER_LAB_AUTH)")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="allow a non-loopback host without a login (anyone who can reach it controls the lab)")
    args = p.parse_args(argv)
    raw = args.auth if args.auth is not None else os.environ.get("RLVER_LAB_AUTH", "")
    try:
        args.auth = parse_auth(raw) if raw else None
    except ValueError as exc:
        p.error(str(exc))
    if not is_loopback(args.host) and args.auth is None and not args.insecure_no_auth:
        p.error(f"refusing to serve on {args.host} without a login: anyone who can reach it could start jobs "
                "and read the store. Give --auth user:password (or RLVER_LAB_AUTH), bind 127.0.0.1, or pass "
                "--insecure-no-auth if you really mean it.")
    if not 0 < args.port < 65536:
        p.error(f"--port must be in 1..65535, got {args.port}")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from storage import make_engine

    from app.context import LabContext
    from app.lab import build_app, launch, startup

    engine = make_engine(args.db)
    done = startup(engine)
    print(f"RLVER Lab: store ready ({done.get('seeded', 0)} built-in personas added), "
          f"serving http://{args.host}:{args.port}{' with a login' if args.auth else ''}", flush=True)
    # The real URL (password included) goes only to job processes, through their environment; the page and
    # the logs never show it.
    ctx = LabContext(engine=engine, engine_url=engine.url.render_as_string(hide_password=False))
    launch(build_app(ctx), host=args.host, port=args.port, auth=args.auth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
