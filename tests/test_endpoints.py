"""Endpoints and keys are the owner's (docs/security.md): from the web a run calls only the endpoints the owner
named, each with its own key; a URL a visitor types is refused (or, where the owner allowed free URLs, called
without any key); no field names an environment variable; redirects are not followed. Checked on the policy
object, then against a real `python -m app` whose every event is called over HTTP (the list read from the app's
/config), with real listeners on 127.0.0.1 standing in for the owner's endpoint and a visitor's."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from helpers import wait_for, wait_for_http

from simulator.access import ACCESS_ENV, Access, AccessError, current_access
from simulator.endpoints import Endpoint, EndpointError, owner_endpoints, parse_endpoint, read_endpoints_file
from simulator.llm.openai_client import OpenAIBackend
from simulator.personas import generation_store
from simulator.user.spec import SimulatorSpec
from testkit import visitor
from testkit.visitor import RecordingServer
from trainer.benchmarking.benchmark import BenchmarkConfig
from trainer.benchmarking.compare import CompareConfig
from trainer.experiments.grid import ExperimentError, parse_grid
from trainer.policies.openai_engine import OpenAIEngine
from trainer.policies.spec import PolicySpec

REPO = Path(__file__).resolve().parent.parent
OWNER_KEY, OPENAI_KEY, CANARY = "owner-key-5d1f0e", "openai-key-a7c2b9", "canary-value-93e4d1"
ORG_CANARY, PROJECT_CANARY = "org-canary-3391", "proj-canary-8812"


def as_web(monkeypatch: pytest.MonkeyPatch, **kw) -> Access:
    access = Access.web(logged_in=False, **kw)
    monkeypatch.setenv(ACCESS_ENV, access.to_json())
    assert current_access() == access
    return access


# ------------------------------------------------------------------------------------------- the policy object
def test_owner_endpoints_from_flags_and_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert parse_endpoint("local=http://127.0.0.1:8000/v1,LOCAL_KEY") == \
        Endpoint("local", "http://127.0.0.1:8000/v1", "LOCAL_KEY")
    for bad, says in (("local", "NAME=URL"), ("a b=http://x", "NAME=URL"), ("x=ftp://h", "http://"),
                      ("x=http://h,1BAD", "KEY_VAR")):
        with pytest.raises(EndpointError, match=says):
            parse_endpoint(bad)
    default, local = owner_endpoints([parse_endpoint("local=http://h:1/v1")])
    assert default == Endpoint("default", "http://127.0.0.1:1/v1", "OPENAI_API_KEY") and local.name == "local"
    assert owner_endpoints([parse_endpoint("default=http://mine/v1,MY_KEY")]) == \
        (Endpoint("default", "http://mine/v1", "MY_KEY"),)
    with pytest.raises(EndpointError, match="named twice"):
        owner_endpoints([parse_endpoint("x=http://a"), parse_endpoint("x=http://b")])
    listed = tmp_path / "endpoints.yaml"
    listed.write_text("vllm: http://127.0.0.1:8000/v1\nremote: {url: https://api.example/v1, key_var: REMOTE_KEY}\n")
    assert read_endpoints_file(listed) == [Endpoint("vllm", "http://127.0.0.1:8000/v1"),
                                           Endpoint("remote", "https://api.example/v1", "REMOTE_KEY")]
    listed.write_text("remote: {url: https://api.example/v1, key: sk-literal}\n")
    with pytest.raises(EndpointError, match="unknown setting 'key'"):
        read_endpoints_file(listed)


def test_a_web_caller_reaches_only_the_owners_endpoints_each_with_its_own_key(monkeypatch):
    monkeypatch.setenv("OWNER_KEY", OWNER_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("CANARY_SECRET", CANARY)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    access = as_web(monkeypatch, endpoints=(parse_endpoint("owner=http://127.0.0.1:8/v1,OWNER_KEY"),))
    assert access.endpoint_names() == ["default", "owner"] and not access.urls_allowed
    assert OWNER_KEY not in access.to_json() and OPENAI_KEY not in access.to_json()  # names of keys, never keys
    route = access.route("f", "owner", api_key=CANARY)  # a key handed over is not the web's to choose
    assert (route.url, route.api_key, route.follow_redirects) == ("http://127.0.0.1:8/v1", OWNER_KEY, False)
    assert access.route("f", "").api_key == OPENAI_KEY and access.route("f", "default").url == "http://127.0.0.1:9/v1"
    assert access.route("f", "http://127.0.0.1:8/v1/").api_key == OWNER_KEY  # an owner's endpoint by its URL
    for typed in ("http://127.0.0.1:7/v1", "http://169.254.169.254/latest", "CANARY_SECRET", "owner2"):
        with pytest.raises(AccessError) as caught:
            access.route("simulator_base_url", typed)
        assert caught.value.field == "simulator_base_url" and "pick one of default, owner" in caught.value.message
    free = as_web(monkeypatch, free_urls=True)
    route = free.route("f", "http://127.0.0.1:7/v1", api_key=CANARY)
    assert (route.url, route.api_key) == ("http://127.0.0.1:7/v1", "")  # a typed URL gets no key at all
    # every client resolves through the caller's Access: the backends, the engine, the generator, the specs
    as_web(monkeypatch, endpoints=(parse_endpoint("owner=http://127.0.0.1:8/v1,OWNER_KEY"),))
    assert OpenAIBackend("m", base_url="owner").route.api_key == OWNER_KEY
    assert OpenAIEngine("m", base_url="owner", api_key=CANARY)._key == OWNER_KEY
    gen = generation_store.make_generator("owner", "m", api_key_env="CANARY_SECRET")
    assert gen.backend.route.api_key == OWNER_KEY
    for build in (lambda: OpenAIBackend("m", base_url="http://127.0.0.1:7/v1", api_key=CANARY),
                  lambda: OpenAIEngine("m", base_url="http://127.0.0.1:7/v1"),
                  lambda: generation_store.make_generator("http://127.0.0.1:7/v1", "m", api_key_env="CANARY_SECRET")):
        with pytest.raises(AccessError, match="names none of this lab's endpoints"):
            build()
    assert SimulatorSpec("openai:m", base_url="http://127.0.0.1:7/v1").errors().keys() == {"simulator_base_url"}
    assert PolicySpec("openai:m", base_url="http://127.0.0.1:7/v1").endpoint_error()
    bench = BenchmarkConfig(policy="openai:m", policy_base_url="http://127.0.0.1:7/v1", simulator="openai:m",
                            simulator_base_url="http://127.0.0.1:7/v1").errors()
    assert {"policy_base_url", "simulator_base_url"} <= set(bench)
    assert "b_base_url" in CompareConfig(a="default", b="openai:m", b_base_url="http://127.0.0.1:7/v1").errors()
    with pytest.raises(ExperimentError) as caught:
        parse_grid("name: g\ngrid: {seed: [0]}\njudge: {model: m, base_url: 'http://127.0.0.1:7/v1'}\n",
                   check_paths=False)
    assert "names none of this lab's endpoints" in caught.value.errors["judge.base_url"]


def test_the_command_line_keeps_free_urls_and_keys(monkeypatch):
    monkeypatch.delenv(ACCESS_ENV, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    assert current_access().urls_allowed
    assert OpenAIBackend("m", base_url="http://127.0.0.1:7/v1").route.api_key == OPENAI_KEY
    assert OpenAIBackend("m", base_url="http://127.0.0.1:7/v1", api_key="handed").route.api_key == "handed"
    monkeypatch.setenv("CANARY_SECRET", CANARY)
    gen = generation_store.make_generator("http://127.0.0.1:7/v1", "m", api_key_env="CANARY_SECRET")
    assert gen.backend.route.api_key == CANARY  # the owner's own --api-key-env


# ------------------------------------------------------------------------------------- a real app, every event
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_lab(tmp_path: Path, extra: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, str, Path]:
    port, log = free_port(), tmp_path / "app.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "app", "--port", str(port), "--db",
                                 f"sqlite:///{tmp_path / 'lab.db'}", *extra], cwd=REPO, env=env,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    wait_for_http(base, proc, log)
    return proc, base, log


def stop_lab(proc: subprocess.Popen) -> None:
    """The app and every job process it started (one process group: start_new_session)."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def visitor_values(visitor_url: str):
    """What a hostile visitor types: a URL of their own in every endpoint field and every free text box that
    could name a model, an `openai:` model for every policy and simulator, config texts naming their URL in
    every endpoint setting, and the names of the lab's secret variables wherever text goes."""
    yaml_text = (f"simulator: openai:canary\nsimulator_base_url: {visitor_url}\npolicy_base_url: {visitor_url}\n"
                 f"judge: {{model: canary, base_url: {visitor_url}}}\napi_key_env: CANARY_SECRET\n")

    def choose(component: dict) -> object:
        kind, label = component["type"], visitor.label(component)
        if kind not in ("textbox", "dropdown"):
            return visitor.default_value(component)
        if "endpoint" in label or "url" in label:
            return visitor_url
        if "yaml" in label or "settings" in label:
            return yaml_text
        if any(word in label for word in ("policy", "simulator", "simulated user", "model", "(the baseline)",
                                          "a win is b")):
            return "openai:canary"
        if kind == "textbox":
            return "CANARY_SECRET"
        return visitor.default_value(component)

    return choose


def stop_jobs(db_url: str) -> None:
    """Kill every job process the sweep started (each runs in its own session, outliving the app)."""
    from storage import make_store
    from trainer.jobs import control as job_control
    from trainer.jobs import queue as job_queue

    store = make_store(db_url)
    for job in job_queue.list_jobs(store):
        if job["status"] in ("queued", "running", "stalled"):
            job_control.cancel(store, job["id"], force=True)
    store.dispose()


@pytest.mark.process
@pytest.mark.slow
@pytest.mark.parametrize("free_urls", [False, True], ids=["named-endpoints-only", "free-urls-allowed"])
def test_no_event_of_the_app_sends_a_secret_to_a_visitors_url_and_the_owners_endpoint_works(tmp_path, free_urls):
    with RecordingServer() as theirs, RecordingServer() as owner, \
            RecordingServer(redirect_to=theirs.base_url) as hop:
        env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1", RLVER_LAB_PLAN_ON_OPEN="0",
                   OPENAI_API_KEY=OPENAI_KEY, OPENAI_BASE_URL=owner.base_url, OWNER_KEY=OWNER_KEY,
                   CANARY_SECRET=CANARY, RLVER_LAB_HOME=str(tmp_path / "home"), OPENAI_ORG_ID=ORG_CANARY,
                   OPENAI_PROJECT_ID=PROJECT_CANARY)
        env.pop("RLVER_LAB_AUTH", None)
        flags = ["--endpoint", f"owner={owner.base_url},OWNER_KEY", "--endpoint", f"hop={hop.base_url},OWNER_KEY"]
        proc, base, log = start_lab(tmp_path, flags + (["--allow-free-urls"] if free_urls else []), env)
        try:
            with httpx.Client(timeout=120) as client:
                page = client.get(base + "/").text + client.get(base + "/config").text
                assert "OWNER_KEY" not in page and "OPENAI_API_KEY" not in page and owner.base_url not in page
                answers = visitor.sweep(base, visitor_values(theirs.base_url), client)
                assert len(answers) > 100  # every event of every view
                assert not [d["api_name"] for d, a in answers if a.get("msg") == "unexpected_error"]
                shown = [str((a.get("output") or {}).get("error") or "") for _, a in answers]
                assert not [e for e in shown if "Traceback" in e or 'File "' in e]  # tracebacks: the log only
                config = visitor.read_config(base, client)
                components = {c["id"]: c for c in config["components"]}
                labels = {i: visitor.label(c) for i, c in components.items()}
                start = next(d for d in config["dependencies"] if str(d.get("api_name")).startswith("on_start")
                             and {"policy endpoint (openai: policies)", "persona(s)"} <= {labels[i] for i in d["inputs"]})
                persona_box = next(i for i in start["inputs"] if labels[i] == "persona(s)")
                fills = next(d for d in config["dependencies"] if d["outputs"] == [persona_box])

                def live(endpoint: str) -> dict:
                    session = f"live-{endpoint[-12:]}"
                    visitor.call(base, fills, [[]], client, session=session)  # the page's load fills the list

                    def value(i: int) -> object:
                        wanted = {"persona(s)": ["en-01-maya-chen"], "policy": "openai:owner-model",
                                  "policy endpoint (openai: policies)": endpoint, "max turns": 1}
                        return wanted.get(labels[i], visitor.default_value(components[i]))
                    return visitor.call(base, start, [value(i) for i in start["inputs"]], client, session=session)

                assert live("owner").get("success"), "the owner's endpoint works from the web"
                live("hop")
                refused = live(theirs.base_url)
                if free_urls:  # the visitor's URL is called (the jobs the sweep started too), with no key
                    wait_for(lambda: theirs.requests, timeout=120)
                else:
                    assert "names none of this lab's endpoints" in str(refused) or "not in the list" in str(refused)
        finally:
            stop_lab(proc)
            stop_jobs(f"sqlite:///{tmp_path / 'lab.db'}")
    seen_by_visitor = theirs.everything()
    for secret in (OWNER_KEY, OPENAI_KEY, CANARY, ORG_CANARY, PROJECT_CANARY):  # the library reads the last two
        assert secret not in seen_by_visitor
    if not free_urls:
        assert theirs.requests == [], theirs.requests[:3]  # not one request, not even through the redirect
    owner_calls = [r for r in owner.requests if "owner-model" in r["body"]]
    assert owner_calls and {r["headers"]["authorization"] for r in owner_calls} == {f"Bearer {OWNER_KEY}"}
    assert hop.requests and all(r["headers"]["authorization"] == f"Bearer {OWNER_KEY}" for r in hop.requests)
    for server in (owner, hop):
        assert CANARY not in server.everything()
    shown = log.read_text()
    assert OWNER_KEY not in shown and OPENAI_KEY not in shown and CANARY not in shown
