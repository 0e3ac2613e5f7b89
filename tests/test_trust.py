"""The lab's trust boundary (docs/security.md): a real server on 127.0.0.1 answers rebinding and
cross-site requests with 403; from the web, `python:` specs are refused in every view that takes one (and
in the job process the app starts), uploaded files are never importable, paths outside the lab's folders get
one message whether they exist or not, and names never become paths. The command line keeps everything, and
`--allow-outside-code` lets the worked example of docs/bring-your-own.md run from the web."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml
from helpers import wait_for_http

from app.services import training as training_service
from app.trust import REFUSED, HostOriginGuard, allowed_hosts
from app.views import live_rollout
from simulator.access import ACCESS_ENV, OUTSIDE_CODE_REFUSED, UPLOAD_REFUSED, Access, current_access, export_path
from simulator.personas import sets as persona_sets
from simulator.personas import store as persona_store
from simulator.personas.builtin import builtin_profiles
from simulator.personas.specs import PersonaSpecError, resolve_personas
from simulator.personas.specs import spec_error as persona_spec_error
from simulator.user.spec import SimulatorSpec
from trainer.benchmarking import benchmark
from trainer.config import TrainConfig
from trainer.jobs import queue as job_queue
from trainer.policies.spec import PolicySpec

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "examples" / "rule_user.py"
PATH_REFUSED = "paths named from the web must lie inside the lab's folders"


def outside_code(folder: Path) -> tuple[Path, Path]:
    """A .py file that writes a marker file when it is imported: (the file, the marker)."""
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "it-ran.txt"
    code = folder / "outside_user.py"
    code.write_text(f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
                    "def make_user(profile, seed):\n    raise RuntimeError('never built')\n"
                    "def reward(sample):\n    return 1.0\n")
    return code, marker


def as_web(monkeypatch: pytest.MonkeyPatch, **kw) -> Access:
    """Make this test process a web caller, as `python -m app` makes its own (simulator.access.install)."""
    access = Access.web(logged_in=kw.pop("logged_in", False), **kw)
    monkeypatch.setenv(ACCESS_ENV, access.to_json())
    assert current_access() == access
    return access


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ------------------------------------------------------------------------------- the front door, over HTTP
@pytest.mark.process
@pytest.mark.slow
def test_rebinding_and_cross_site_requests_get_403_and_uploads_are_never_code(tmp_path, monkeypatch):
    port, uploads = free_port(), tmp_path / "uploads"
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1", GRADIO_TEMP_DIR=str(uploads))
    env.pop("RLVER_LAB_AUTH", None)
    log = tmp_path / "app.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--db",
                                 f"sqlite:///{tmp_path / 'lab.db'}", "--allowed-host", "lab.example",
                                 "--allow-outside-code"], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(base, proc, log)
        with httpx.Client(base_url=base, timeout=60) as c:
            for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"lab.example:{port}"):
                assert c.get("/", headers={"Host": host}).status_code == 200, host
            rebinding = {"Host": f"attacker.example:{port}", "Origin": f"http://attacker.example:{port}"}
            for method, path in (("GET", "/"), ("GET", "/config"), ("GET", "/gradio_api/info"),
                                 ("POST", "/gradio_api/upload"), ("OPTIONS", "/gradio_api/upload")):
                r = c.request(method, path, headers={**rebinding, "Access-Control-Request-Method": "POST"})
                assert r.status_code == 403, (method, path, r.status_code)
                assert "access-control-allow-origin" not in r.headers
                assert r.text == REFUSED.decode()
            cross_site = c.get("/", headers={"Origin": "http://attacker.example"})
            assert cross_site.status_code == 403 and "access-control-allow-origin" not in cross_site.headers
            assert c.get("/", headers={"Origin": "null"}).status_code == 403
            assert c.get("/", headers={"Origin": base}).status_code == 200
            # the upload endpoint takes a .py (the page's own origin) ...
            up = c.post("/gradio_api/upload", headers={"Origin": base},
                        files={"files": ("make_user.py", b"open('/tmp/never', 'w')\ndef make_user(p, s): ...\n")})
            assert up.status_code == 200, up.text
            server_path = up.json()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=120)
    # ... but what it kept is never importable, not even with --allow-outside-code or from the command line
    assert Path(server_path).resolve().is_relative_to(uploads.resolve())
    spec = f"python:{server_path}:make_user"
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(uploads))  # where the server kept it
    for access in (Access.web(logged_in=True, allow_outside_code=True), Access()):
        assert SimulatorSpec(spec, access=access).errors() == {"simulator": UPLOAD_REFUSED}
        with pytest.raises(ValueError, match="never run as code"):
            SimulatorSpec(spec, access=access).factory()
    assert not Path("/tmp/never").exists()


def test_the_host_names_the_lab_answers_to():
    assert allowed_hosts("127.0.0.1") == {"127.0.0.1"}
    assert allowed_hosts("0.0.0.0", ["Lab.Example.org"]) == {"lab.example.org"}  # a wildcard implies nothing
    assert allowed_hosts("lab.example.org") == {"lab.example.org"}  # --host NAME implies --allowed-host NAME
    guard = HostOriginGuard(None, allowed_hosts("0.0.0.0", ["lab.example.org"]))
    assert guard.refusal({"host": "[::1]:7860", "origin": "http://localhost:7860"}) == ""
    assert guard.refusal({"host": "LAB.example.org:7860", "origin": "https://lab.example.org"}) == ""
    assert guard.refusal({"host": "lab.example.org.attacker.example:7860"}) == "host"
    assert guard.refusal({}) == "host"  # no Host header at all
    assert guard.refusal({"host": "127.0.0.1:7860", "origin": "file://"}) == "origin"
    # a page of another local service (same loopback name, another port) is another site
    assert guard.refusal({"host": "127.0.0.1:7860", "origin": "http://127.0.0.1:8080"}) == "origin"
    assert guard.refusal({"host": "127.0.0.1", "origin": "http://127.0.0.1"}) == ""
    assert guard.refusal({"host": "127.0.0.1:7860, evil.example"}) == "host"  # one name, not a list
    assert guard.refusal({"host": "127.0.0.1:7860", "origin": "http://127.0.0.2:7860"}) == "origin"
    assert guard.refusal({"host": "127.0.0.2:7860", "origin": "http://127.0.0.2:7860"}) == ""  # same origin


def _through(guard_of, headers: list[tuple[bytes, bytes]]) -> tuple[int, list]:
    """(status, the headers the app behind the guard saw) for one request through HostOriginGuard."""
    import asyncio

    seen, sent = [], []

    async def app(scope, receive, send):
        seen.extend(scope["headers"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request"}

    asyncio.run(guard_of(app)({"type": "http", "path": "/", "headers": headers}, receive, send))
    return sent[0]["status"], seen


def test_two_host_or_origin_headers_are_refused_and_forwarded_headers_need_behind_proxy():
    guard = lambda app: HostOriginGuard(app, allowed_hosts("127.0.0.1"))  # noqa: E731
    own = (b"host", b"127.0.0.1:7860")
    assert _through(guard, [own])[0] == 200
    assert _through(guard, [own, (b"host", b"attacker.example")])[0] == 403
    assert _through(guard, [(b"host", b"attacker.example"), own])[0] == 403
    twice = [own, (b"origin", b"http://127.0.0.1:7860"), (b"origin", b"http://attacker.example")]
    assert _through(guard, twice)[0] == 403
    forwarded = [own, (b"x-forwarded-host", b"attacker.example"), (b"X-Forwarded-Proto", b"https"),
                 (b"forwarded", b"host=attacker.example")]
    status, seen = _through(guard, forwarded)
    assert status == 200 and seen == [own]  # dropped before Gradio builds its root URL from them
    proxied = lambda app: HostOriginGuard(app, allowed_hosts("127.0.0.1"), behind_proxy=True)  # noqa: E731
    assert _through(proxied, forwarded)[1] == forwarded


# ------------------------------------------------------------------------------------ outside code, web
def test_a_python_spec_is_refused_in_every_view_that_takes_one(tmp_path, store, db_url, monkeypatch):
    code, marker = outside_code(tmp_path / "outside")
    as_web(monkeypatch)
    simulator = f"python:{code}:make_user"
    # Live rollout: the simulator field
    outs = list(live_rollout.start_rollout(store, "trust", ["en-03-aisha-bello"], "openai:never-called", "", simulator,
                                           "", "standard", "direct", 1, 2, 8, 1.0, 0))
    assert OUTSIDE_CODE_REFUSED in outs[-1][0].replace("\\", ""), outs[-1][0]  # shown as markdown
    # Benchmark: the simulator field; nothing recorded, nothing launched
    with pytest.raises(ValueError, match="not run for a web page"):
        benchmark.start_benchmark_job(store, db_url, {"policy": "openai:never-called", "simulator": simulator,
                                                      "profiles": "builtin:heldout"})
    # Training: the simulator field and `reward:` in the YAML of other settings
    values = dict(zip(training_service.FORM_NAMES, training_service.form_values()))
    values["simulator"] = simulator
    config, errors = training_service.config_from_form(values, f"reward: python:{code}:reward", check_paths=False)
    assert config is None
    assert errors["simulator"] == OUTSIDE_CODE_REFUSED and errors["reward"] == OUTSIDE_CODE_REFUSED
    assert job_queue.list_jobs(store) == []
    assert not marker.exists()
    # a module name is refused alike (nothing is imported to find out whether it exists)
    assert SimulatorSpec("python:os:getcwd").errors() == {"simulator": OUTSIDE_CODE_REFUSED}


@pytest.mark.process
@pytest.mark.slow
def test_a_job_the_web_starts_keeps_the_web_rules(tmp_path, store, db_url, monkeypatch):
    """The job process runs the spec: started from the web (the environment the app installs), it refuses
    the outside reward even though nothing checked the config before it was recorded."""
    code, marker = outside_code(tmp_path / "outside")
    as_web(monkeypatch)
    # the CPU demo's settings, so the job fits this machine and its process starts (a job the plan says will not
    # fit is refused before it starts, for memory, and would never reach the outside reward)
    demo = yaml.safe_load((REPO / "configs" / "learning-curve-cpu.yaml").read_text())
    config = {**demo, "reward": f"python:{code}:reward", "steps": 1}
    job_id = job_queue.create_job(store, "train", config, name="from the web")
    job_queue.launch(db_url, job_id)
    deadline = time.monotonic() + 300
    while (job := job_queue.get_job(store, job_id))["status"] not in job_queue.FINAL_STATUSES:
        assert time.monotonic() < deadline, job
        time.sleep(0.5)
    detail = job_queue.job_detail(store, job_id)
    assert job["status"] == "failed", job
    assert OUTSIDE_CODE_REFUSED in (detail.get("error") or "") + (detail.get("log_tail") or ""), detail
    assert not marker.exists()


# ------------------------------------------------------------------------------------------ paths, web
def test_paths_outside_the_lab_get_one_message_whether_they_exist_or_not(tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    real = outside / "profiles.jsonl"
    real.write_text('{"not": "a profile"}\n{"also": 1}\n')
    (outside / "model").mkdir()
    (outside / "model" / "config.json").write_text("{}")
    missing = outside / "missing.jsonl"
    as_web(monkeypatch)

    def probes(path: Path) -> dict[str, str]:
        """Every field a visitor can put a path in, and what it answers."""
        found = {
            "file:": persona_spec_error(f"file:{path}"),
            "policy folder": PolicySpec(str(path)).error(),
            "replay: policy": PolicySpec(f"replay:{path}").error(),
            "vllm:": PolicySpec(f"vllm:{path}").error(),
            "replay: simulator": SimulatorSpec(f"replay:{path}").errors().get("simulator", ""),
            "sage:": SimulatorSpec(pack=f"sage:{path}").errors().get("prompt_pack", ""),
            "rlver:": SimulatorSpec(pack=f"rlver:{path}").errors().get("prompt_pack", ""),
            "output_dir": TrainConfig(output_dir=str(path)).errors(check_paths=False).get("output_dir", ""),
            "model": TrainConfig(model=str(path)).errors(check_paths=True).get("model", ""),
        }
        for name, spec in (("bare path", str(path)), ("file: resolved", f"file:{path}")):
            with pytest.raises(PersonaSpecError) as e:
                resolve_personas(spec)
            found[name] = str(e.value)
        return found

    # the Training view's YAML of other settings names output_dir: refused there, nothing recorded
    values = dict(zip(training_service.FORM_NAMES, training_service.form_values()))
    config, errors = training_service.config_from_form(values, f"output_dir: {outside / 'run'}", check_paths=False)
    assert config is None and PATH_REFUSED in errors["output_dir"]
    assert not (outside / "run").exists()
    for target in (real, missing, outside / "model"):
        answers = probes(target)
        for field, message in answers.items():
            assert PATH_REFUSED in message, (field, message)
            assert str(target) not in message and "exist" not in message and "line" not in message, message
        assert answers == probes(missing)  # the same words for a file that exists and one that does not
    # a symlink inside the lab home that points out is followed, and refused
    link = Path(os.environ["RLVER_LAB_HOME"]) / "link.jsonl"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(real)
    assert PATH_REFUSED in persona_spec_error(f"file:{link}")
    # inside the lab home, or a root the owner allowed, the path is read as before
    home_file = Path(os.environ["RLVER_LAB_HOME"]) / "missing.jsonl"
    assert "not found" in persona_spec_error(f"file:{home_file}")
    as_web(monkeypatch, allowed_paths=(str(outside),))
    assert "not found" in persona_spec_error(f"file:{missing}")
    assert TrainConfig(output_dir=str(outside / "run")).errors(check_paths=False).get("output_dir") is None
    # the command line names any path
    monkeypatch.delenv(ACCESS_ENV)
    assert "not found" in persona_spec_error(f"file:{missing}")
    assert "output_dir" not in TrainConfig(output_dir=str(tmp_path / "anywhere")).errors(check_paths=False)


def test_a_traversing_set_name_never_becomes_a_path(store, tmp_path):
    name = "../../../tmp/trust-x"
    persona_store.seed_builtin(store)
    persona_sets.create_set(store, name, builtin_profiles("heldout")[:2], "filter")
    out = export_path(name, "lab")  # what the Sets panel's Export writes to
    assert out.name == "tmp_trust-x-lab.jsonl"
    assert persona_sets.export_set(store, name, out, "lab") == 2
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]
    assert not Path("/tmp/trust-x-lab.jsonl").exists()
    assert export_path("personas", "../../x").name == "personas-x.jsonl"


# ------------------------------------------------------------------------------------------ positive cases
def test_the_worked_example_runs_from_the_web_with_allow_outside_code_and_always_from_the_shell(
        store, tiny_model_dir, monkeypatch):
    spec = f"python:{EXAMPLE}:make_user"
    profile = builtin_profiles("heldout")[0]
    assert SimulatorSpec(spec).errors() == {}  # the command line
    assert SimulatorSpec(spec).factory()(profile, 0).fingerprint()["backend"] == "python"
    as_web(monkeypatch, logged_in=True)
    assert SimulatorSpec(spec).errors() == {"simulator": OUTSIDE_CODE_REFUSED}
    as_web(monkeypatch, logged_in=True, allow_outside_code=True, allowed_paths=(str(tiny_model_dir),))
    outs = list(live_rollout.start_rollout(store, "trust-ok", [profile.id], str(tiny_model_dir), "", spec, "",
                                           "standard", "direct", 1, 2, 8, 1.0, 0))
    assert outs[-1][0].startswith("Done:"), outs[-1][0]  # "Done: 1 dialogue ended at the turn limit."
