"""What an open lab page costs the machine it is viewed on: headless Chromium's CPU per tab, with the lab's
frame-pacing script (app.page_script) and with it taken out of the page.

    python -m benchmarks.page_cpu [--tabs live,training,experiments,benchmark,rate] [--seconds 30]

Starts the lab (`python -m app`) on a free port with a new SQLite file and lab home (opening Training plans
nothing), opens it in headless Chromium (/usr/bin/chromium, through Playwright) twice: as served, and with the
page's first script removed on its way in. For each tab it opens the tab, lets it settle for 5 s, then counts
over --seconds the CPU time of the browser's processes (from /proc) and the animation frames the page asked
for. Prints one table. Nothing is live in the lab, so this is the cost of a page left open.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
SETTLE_S = 5.0
COUNT_FRAMES = """window.frames_asked = 0;
const ask = window.requestAnimationFrame.bind(window);
window.requestAnimationFrame = (callback) => { window.frames_asked++; return ask(callback); };"""


def tree_cpu_s(root: int, leave_out: int) -> float:
    """User + system CPU seconds of `root`'s descendants (not `root` itself) but for `leave_out` and its own
    descendants (the lab), from /proc."""
    parent, ticks = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        pid = int(stat.parent.name)
        parent[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])
    below, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier and pid != leave_out} - below
        below |= frontier
    return sum(ticks[pid] for pid in below) / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(url: str, lab_pid: int, tabs: list[str], seconds: float, paced: bool) -> dict[str, tuple[float, float]]:
    """tab -> (browser CPU seconds, frames asked per second) over `seconds` on that tab."""
    from playwright.sync_api import sync_playwright

    from app.page_script import FRAME_PACING

    out = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(COUNT_FRAMES)
        if not paced:
            def without_script(route) -> None:
                response = route.fetch()
                body = response.text().replace(f"<script>{FRAME_PACING}</script>", "", 1)
                route.fulfill(response=response, body=body)

            page.route(url, without_script)
        page.goto(url)
        page.wait_for_selector(".gradio-container", state="attached")
        for tab in tabs:
            page.click(f"#tab-{tab}-button")
            time.sleep(SETTLE_S)
            cpu, frames = tree_cpu_s(os.getpid(), lab_pid), page.evaluate("() => window.frames_asked")
            time.sleep(seconds)
            out[tab] = (tree_cpu_s(os.getpid(), lab_pid) - cpu,
                        (page.evaluate("() => window.frames_asked") - frames) / seconds)
        browser.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tabs", default="live,training,experiments,benchmark,rate")
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} not found (apt-get install chromium)", file=sys.stderr)
        return 2
    home = Path(tempfile.mkdtemp(prefix="page-cpu-"))
    port = free_port()
    env = dict(os.environ, RLVER_LAB_HOME=str(home / "lab_home"), RLVER_LAB_PLAN_ON_OPEN="0", HF_HUB_OFFLINE="1",
               PYTHONPATH=str(REPO))
    lab = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--db", f"sqlite:///{home / 'lab.db'}"],
                           cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(240):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        tabs = [t.strip() for t in args.tabs.split(",") if t.strip()]
        paced = measure(url, lab.pid, tabs, args.seconds, True)
        unpaced = measure(url, lab.pid, tabs, args.seconds, False)
    finally:
        lab.terminate()
        lab.wait(timeout=60)
    print(f"browser CPU seconds and animation frames asked per second over {args.seconds:g} s on each tab "
          f"(nothing live; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")
    print(f"{'tab':12s} {'CPU s paced':>12s} {'unpaced':>9s} {'frames/s paced':>15s} {'unpaced':>9s}")
    for tab in tabs:
        print(f"{tab:12s} {paced[tab][0]:12.1f} {unpaced[tab][0]:9.1f} {paced[tab][1]:15.1f} {unpaced[tab][1]:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
