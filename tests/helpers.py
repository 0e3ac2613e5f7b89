"""Small helpers shared by test modules (import as `from helpers import ...`; tests/ is on sys.path)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from simulator.personas.builtin import get_builtin
from storage import Dialogue, EvalRun, Job, Metric, Turn, dialogues, make_store, read_scope, session_scope

# `@pytest.mark.parametrize("db_url", BACKENDS, indirect=True)`: the test (and the `store` fixture) on a SQLite
# file, then on a new database of the session's PostgreSQL server (tests/conftest.py)
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def wait_for(cond: Callable[[], Any], timeout: float = 60.0, every: float = 0.1) -> Any:
    """Poll `cond` until it returns something truthy (returned) or fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("condition not reached in time")


def off_loop(fn: Callable[[], Any]) -> Any:
    """Run `fn` in a worker thread: a module's browser tests (sync Playwright) keep an event loop running in
    the main thread, where DialogueRollout.run() refuses to block."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn).result()


async def play_dialogue(agent: Any, replies: list[str]) -> list[Any]:
    """The agent's opening, then one user turn per policy reply until the dialogue ends: [opening, *turns]."""
    first = await agent.opening()
    history, turns = [{"role": "user", "content": first.text}], [first]
    for reply in replies:
        turn = await agent.respond(history, reply)
        turns.append(turn)
        history += [{"role": "assistant", "content": reply}, {"role": "user", "content": turn.text}]
        if turn.done:
            break
    return turns


def wait_for_http(base: str, proc: Any, log: Any, tries: int = 240) -> None:
    """Wait until a server process answers GET `base`/ (any status); it must not exit meanwhile (its log
    file `log` is shown if it does)."""
    import httpx

    for _ in range(tries):
        try:
            httpx.get(base + "/", timeout=2)
            return
        except httpx.TransportError:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.5)
    raise AssertionError(f"{base} did not answer")


@contextmanager
def served_lab_with_login(tmp_path: Path, db_url: str, password: str, *extra: str) -> Iterator[tuple[str, int, Path]]:
    """`python -m app --auth-file` (one account, ana:`password`) on a free 127.0.0.1 port over `db_url`, with
    `extra` arguments and no login or proxy setting from this environment: (base URL, port, its log file) once
    it answers; stopped after."""
    from conftest import free_port

    port = free_port()
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1")
    env.pop("RLVER_LAB_AUTH", None)
    env.pop("FORWARDED_ALLOW_IPS", None)
    auth_file = tmp_path / "auth.txt"
    auth_file.write_text(f"ana:{password}\n")
    log = tmp_path / "app.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--db", db_url, "--auth-file",
                                 str(auth_file), *extra], cwd=Path(__file__).resolve().parent.parent, env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(base, proc, log)
        yield base, port, log
    finally:
        proc.terminate()
        proc.wait(timeout=120)


@contextmanager
def ray_backend_store(address: str, postgres_url: str, tmp_path: Path, monkeypatch: Any) -> Iterator[tuple[Any, Path]]:
    """This test's store (PostgreSQL) with the ray backend of the cluster at `address` and a shared folder
    (tmp_path/shared): (store, shared folder); the environment is undone after the test (monkeypatch)."""
    from trainer.jobs import backend

    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setenv(backend.JOBS_ENV, backend.LOCAL)
    monkeypatch.setenv(backend.SHARED_ENV, str(shared))
    backend.configure(address, str(shared), postgres_url)
    store = make_store(postgres_url)
    try:
        yield store, shared
    finally:
        store.dispose()


# ---- the Personas view's form, in a real browser
def fill(page: Any, elem_id: str, text: str) -> None:
    page.locator(f"#{elem_id} textarea").fill(text)


def choose(page: Any, elem_id: str, option: str) -> None:
    """Pick a dropdown option and wait until the dropdown shows it (in its box, or as a token of a multiselect):
    a click on another control before then can send the old value on a loaded machine."""
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option", name=option).click()
    page.wait_for_function("([id, opt]) => { const el = document.getElementById(id); const box = el && "
                           "el.querySelector('input'); return !!el && ((box && box.value === opt) || "
                           "el.innerText.includes(opt)); }", arg=[elem_id, option], timeout=60_000)


def new_form(page: Any) -> None:
    """Click New and wait until its reset has landed (the title may already have said "New persona")."""
    from playwright.sync_api import expect

    page.click("#persona-new")
    expect(page.locator("#persona-form-title")).to_contain_text("New persona")
    expect(page.locator("#persona-id textarea")).to_have_value("")
    expect(page.locator("#persona-status")).not_to_contain_text("Not saved")


def fill_night_nurse(page: Any, persona_id: str, first_line: str) -> None:
    """The persona form filled with one avoidant just-listen persona (the form must be new and empty)."""
    fill(page, "persona-id", persona_id)
    fill(page, "persona-name", "Mara, night nurse")
    choose(page, "persona-need-category", "Just listen to the venting (just_listen)")
    choose(page, "persona-personality", "avoidant")
    fill(page, "persona-traits", "tired, proud, guarded")
    fill(page, "persona-persona", "Mara, 41, a night-shift nurse who jokes to deflect and talks in short bursts.")
    fill(page, "persona-background", "Her ward lost a patient last night. Replies that let her vent calm her; "
                                     "advice or silver linings make her shut down.")
    fill(page, "persona-hidden-need", "To be heard without being fixed.")
    fill(page, "persona-first-line", first_line)


def tiny_train_config(tmp_path: Any, model: Any, **changes: Any) -> Any:
    """configs/tiny-test.yaml with the given model and changes, written to tmp_path/train.yaml; its path."""
    from pathlib import Path

    import yaml

    cfg = yaml.safe_load((Path(__file__).resolve().parent.parent / "configs" / "tiny-test.yaml").read_text())
    cfg.update(model=str(model), **changes)
    path = Path(tmp_path) / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


REPO = Path(__file__).resolve().parent.parent


def trainer_cli(*args: str, env_home: Path, **kw) -> subprocess.Popen:
    """`python -m trainer ARGS` in the checkout with its own lab home; stdout and stderr together, as text."""
    env = dict(os.environ, RLVER_LAB_HOME=str(env_home), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "trainer", *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


def trainer_run(*args: str, env_home: Path) -> subprocess.CompletedProcess:
    """`python -m trainer ARGS` to its end in this process (run_in_process) with its own lab home."""
    return run_in_process("trainer", *args, env={"RLVER_LAB_HOME": str(env_home), "HF_HUB_OFFLINE": "1"})


def wait_for_step(store, proc, step: int, timeout: float = 600) -> int:
    """The id of the (only) job once its metrics of `step` are stored; the trainer must stay alive."""
    def reached():
        assert proc.poll() is None, proc.stdout.read()
        with read_scope(store) as s:
            job_id = s.scalars(select(Job.id)).first()
        return job_id if job_id and step in metric_steps(store, job_id, "reward_mean") else None

    return wait_for(reached, timeout=timeout, every=0.2)


def metric_steps(store, job_id: int, name: str) -> list[int]:
    """The steps at which the job stored a metric of that name, in order."""
    with read_scope(store) as s:
        return sorted(m.step for m in s.scalars(select(Metric).where(Metric.job_id == job_id, Metric.name == name)))


WARM_REPLIES = ["That sounds really hard, and it makes sense you feel worn out. What happened next?",
        "I hear you. It must be lonely to carry that. Could you try telling one friend?"]
COLD_REPLIES = ["Just relax, it's not a big deal.", "Whatever. Calm down."]


def store_judged_dialogues(store, replies_by_name: dict[str, list[str]], eval_run: bool = True) -> dict[str, int]:
    """One finished dialogue per entry (user opening, then reply / user answer pairs); name -> id."""
    ids = {}
    with session_scope(store) as s:
        run = EvalRun(name="judged", model_ref="policy") if eval_run else None
        if run is not None:
            s.add(run)
            s.flush()
        for name, replies in replies_by_name.items():
            d = Dialogue(persona_id=name, status="finished", final_emotion=50.0, collection="judge-test",
                         persona_snapshot={"background": "Lost a job last month.", "hidden_need": "to be heard"},
                         eval_run_id=run.id if run is not None else None)
            s.add(d)
            s.flush()
            texts = [("user", "I don't know, everything is a mess.")]
            for reply in replies:
                texts += [("assistant", reply), ("user", "Yeah.")]
            s.add_all(Turn(dialogue_id=d.id, index=i, role=role, text=t) for i, (role, t) in enumerate(texts))
            ids[name] = d.id
    return ids


def start_comparison_in_view(page: Any, store: Any, a: Any, b: Any, limit: int, max_new_tokens: int = 8) -> int:
    """Fill the Compare view's A, B, limit and reply cap, press Start and wait for the job to say so; returns
    the comparison's id (the newest)."""
    import re

    from playwright.sync_api import expect

    from trainer.benchmarking import compare

    page.get_by_role("tab", name="Compare").click()
    for side, policy in (("a", a), ("b", b)):
        box = page.locator(f"#cmp-{side} input")
        box.fill(str(policy))
        box.press("Enter")
    page.locator("#cmp-limit input").fill(str(limit))
    page.locator("#cmp-max-new input").fill(str(max_new_tokens))
    page.locator("#cmp-max-new input").press("Tab")

    def newest() -> int:
        return (compare.list_comparisons(store) or [{}])[0].get("id") or 0

    before = newest()
    page.locator("#cmp-start").click()
    cid = wait_for(lambda: newest() if newest() > before else None, timeout=60)
    # "Comparison #N started", or already its status line when a small comparison ends before the page polls
    # (the page is shared by a module's tests: an earlier comparison's line must not count)
    expect(page.locator("#cmp-job")).to_contain_text(re.compile(rf"Comparison #{cid}\b"), timeout=60_000)
    return cid


def _loop_running() -> bool:
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_in_process(module: str, *args: str, env: dict[str, str] | None = None,
                   stdin: str = "") -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` as its `main(ARGS)` in this process: the same code, without an interpreter start
    and torch's import again (~10 s of CPU each). stdout and stderr are captured apart; `env` is added to the
    environment for the call, and the environment is restored after it. Tests of what only a real process
    shows (kill -9, signals, the launcher) start one instead."""
    import contextlib
    import importlib
    import io

    main = importlib.import_module(f"{module}.__main__").main
    out, err, saved = io.StringIO(), io.StringIO(), dict(os.environ)
    os.environ.update(env or {})
    stdin_before = sys.stdin
    sys.stdin = io.StringIO(stdin)

    def call() -> int:
        try:
            return main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)

    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            # a command runs its own event loops: where this thread already runs one (Playwright's sync API
            # in a browser test), it runs in a thread of its own, as `off_loop` does
            code = off_loop(call) if _loop_running() else call()
    finally:
        sys.stdin = stdin_before
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["python", "-m", module, *args], code, out.getvalue(), err.getvalue())


CHANGES = [4.0, -6.0, 2.0, -10.0]


def make_dialogue(store, persona_id="en-01-maya-chen", fp="fp-offline", changes=CHANGES, source="rollout",
                  eval_run_id=None) -> int:
    """A stored dialogue: the opening, then policy replies each answered with a simulator change."""
    persona = get_builtin(persona_id)
    did = dialogues.start_dialogue(store, persona_id=persona_id, persona_snapshot=persona.to_dict(), source=source,
                                   fingerprint_hash=fp, eval_run_id=eval_run_id)
    emotion = 40.0
    dialogues.add_turn(store, did, 0, "user", "opening", emotion=emotion, delta=0.0)
    for k, change in enumerate(changes):
        emotion += change
        dialogues.add_turn(store, did, 2 * k + 1, "assistant", f"reply {k + 1}")
        dialogues.add_turn(store, did, 2 * k + 2, "user", f"answer {k + 1}", emotion=emotion, delta=change,
                           inner={"analyse": f"felt {change:+g}"})
    dialogues.finish_dialogue(store, did, "finished", emotion, outcome="max_turns")
    return did


# --- benchmark and comparison runs whose dialogues are compared (tests/test_resume_runs.py, test_ray_jobs.py):
# the tiny random model against a slow simulated user (a python: user file, 0.25 s a reply, whose emotion
# depends on the reply and on the dialogue's seed)
N_PERSONAS = 4

SEEDED_USER = """
import asyncio
import zlib
from simulator.user.agent import UserTurn


class SeededUser:
    def __init__(self, profile, seed):
        self.seed, self.replies = seed, 0

    async def opening(self):
        return UserTurn(text="I had a hard day.", emotion=40.0)

    async def respond(self, dialogue, reply):
        await asyncio.sleep(0.25)
        self.replies += 1
        delta = float((zlib.crc32(reply.encode("utf-8")) + self.seed) % 13 - 6)
        done = self.replies >= 3
        return UserTurn(text="Go on.", emotion=40.0 + delta * self.replies, delta=delta, done=done,
                        outcome="max_turns" if done else "")

    def fingerprint(self):
        return {"model": "seeded-slow-user"}


def make_user(profile, seed):
    return SeededUser(profile, seed)
"""


def bench_args(tiny_model_dir: Path, user_spec: str, db_url: str) -> list[str]:
    return ["benchmark", "--policy", str(tiny_model_dir), "--simulator", user_spec, "--profiles", "builtin",
            "--limit", str(N_PERSONAS), "--max-new-tokens", "8", "--concurrency", "1", "--seed", "3",
            "--db", db_url, "--json"]


def statuses(db_url: str, eval_run_id: int | None = None) -> list[tuple[str, str, int]]:
    """(persona, status, policy replies stored) of every dialogue (of one eval run), in id order."""
    store = make_store(db_url)
    try:
        with read_scope(store) as s:
            q = select(Dialogue).order_by(Dialogue.id)
            if eval_run_id is not None:
                q = q.where(Dialogue.eval_run_id == eval_run_id)
            rows = list(s.scalars(q))
            replies = {d.id: len(list(s.scalars(select(Turn.id).where(Turn.dialogue_id == d.id,
                                                                      Turn.role == "assistant")))) for d in rows}
            return [(d.persona_id, d.status, replies[d.id]) for d in rows]
    finally:
        store.dispose()


def results(db_url: str, eval_run_id: int) -> list[tuple]:
    """Per scored dialogue: persona, seed, final emotion and every turn (role, text, emotion), by persona."""
    store = make_store(db_url)
    try:
        with read_scope(store) as s:
            out = []
            for d in s.scalars(select(Dialogue).where(Dialogue.eval_run_id == eval_run_id,
                                                      Dialogue.status != "cancelled")):
                turns = s.scalars(select(Turn).where(Turn.dialogue_id == d.id).order_by(Turn.index))
                out.append((d.persona_id, d.seed, d.status, d.final_emotion,
                            tuple((t.role, t.text, t.emotion) for t in turns)))
            return sorted(out)
    finally:
        store.dispose()



def finished(db_url: str) -> int:
    return sum(st == "finished" for _, st, _ in statuses(db_url))



def compare_args(tiny_model_dir: Path, other: Path, user_spec: str, db_url: str) -> list[str]:
    return ["compare", "--a", str(tiny_model_dir), "--b", str(other), "--simulator", user_spec, "--profiles",
            "builtin", "--limit", "3", "--max-new-tokens", "8", "--seed", "5", "--db", db_url, "--json"]



def pair_results(db_url: str, comparison_id: int) -> list[tuple]:
    from trainer.benchmarking import compare

    store = make_store(db_url)
    try:
        pairs = compare.comparison_pairs(store, comparison_id, with_turns=True)
        return sorted((p["persona"], p["seed"], p["a_final"], p["b_final"],
                       tuple(t["text"] for t in p["a_turns"]), tuple(t["text"] for t in p["b_turns"])) for p in pairs)
    finally:
        store.dispose()

