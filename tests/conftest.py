"""Shared fixtures. Everything is offline: no hub downloads, no analytics, no outside connections."""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest

REPO = Path(__file__).resolve().parent.parent

# Markers (pytest.ini lists them) say what a test needs, so `make test-fast` can leave out whole kinds. They are
# explicit: a test says so with a decorator or its module's `pytestmark`, or through a fixture that implies it
# (FIXTURE_MARKS). Nothing is guessed from source text. `model` is also enforced: a test without it that reaches
# the packaged SmolLM2 or MiniLM fails with a message saying to mark it (_packaged_models_need_the_model_mark).
FIXTURE_MARKS = {"lab_server": ("browser",), "browser_page": ("browser",), "shared_data": ("data",),
                 "shared_reference": ("data",), "postgres_server": ("postgres",), "postgres_url": ("postgres",),
                 "ray_cluster": ("process",)}


def pytest_configure(config: pytest.Config) -> None:
    """One torch/OpenMP thread per core between the workers: `make test` runs `-n` worker processes, and each
    worker, its lab server's jobs and its command-line children would otherwise start one thread per core and
    oversubscribe them (two processes each running the probes on two threads of a 2-core machine: 91 s; on one
    thread each: 77 s). Set here, before the workers start, so that they and their children inherit it."""
    workers = config.getoption("numprocesses", default=None)
    if isinstance(workers, int) and workers > 0:
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            for name in FIXTURE_MARKS.get(fixture, ()):
                item.add_marker(getattr(pytest.mark, name))
    items[:] = slow_modules_first(items)


def slow_modules_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """The tests of modules holding a `slow` test first, each module's tests together and in their order.
    `make test` hands whole modules to its workers in this order (pytest-xdist, --dist loadfile
    --no-loadscope-reorder), so the long ones start early and the workers finish together."""
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    slow = {module(i) for i in items if i.get_closest_marker("slow")}
    return sorted(items, key=lambda i: module(i) not in slow)  # stable: the order within each group is kept


@pytest.fixture(autouse=True)
def _packaged_models_need_the_model_mark(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In a test not marked `model`, the loaders of the packaged models raise instead of loading (in this
    process; a job or command the test starts is not watched), whatever earlier tests cached. Browser tests are
    left alone: `make test-fast` leaves them all out, and the lab server they share serves other tests'
    requests too."""
    if request.node.get_closest_marker("model") or request.node.get_closest_marker("browser"):
        return
    from simulator.llm import embedding, models
    from simulator.user.backends import coherence

    def refuse(*args, **kwargs):
        raise RuntimeError(f"{request.node.nodeid} loads a packaged model (SmolLM2 or MiniLM) but is not marked "
                           "`model`: add @pytest.mark.model")

    for module, name in ((models, "model_cache_dir"), (models, "default_gguf_path"), (coherence, "get_scorer"),
                         (embedding, "get_encoder")):
        monkeypatch.setattr(module, name, refuse)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Tests marked gpu (tests/test_gpu.py) run only where torch sees a CUDA device."""
    if item.get_closest_marker("gpu") is not None:
        import torch

        if not torch.cuda.is_available():
            pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)")


def shared_data_dir() -> Path:
    """RLVER_SHARED_DATA, default ../shared/data beside the checkout."""
    return Path(os.environ.get("RLVER_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture
def shared_data() -> Path:
    path = shared_data_dir()
    if not (path / "sage").is_dir() or not (path / "rlver").is_dir():
        pytest.skip(f"RLVER/SAGE data not found under {path} (set RLVER_SHARED_DATA)")
    return path


@pytest.fixture
def shared_reference() -> Path:
    """SAGE's and RLVER's own code (MIT): RLVER_SHARED_REFERENCE, default ../shared/reference."""
    path = Path(os.environ.get("RLVER_SHARED_REFERENCE", REPO.parent / "shared" / "reference"))
    if not (path / "sage" / "simulator_response.py").is_file():
        pytest.skip(f"SAGE reference code not found under {path} (set RLVER_SHARED_REFERENCE)")
    return path


@pytest.fixture
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh real SQLite file per test. A test decorated `@pytest.mark.parametrize("db_url", BACKENDS,
    indirect=True)` (helpers.BACKENDS) runs on a new database of the session's PostgreSQL too."""
    if getattr(request, "param", "sqlite") == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'lab.db'}"


# --- PostgreSQL: one real server per test session (testkit.postgres), a fresh database per test ----------------
@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server in a temporary folder on a free 127.0.0.1 port; skipped (with the reason) only
    when the server binaries or the driver are missing (`make test` installs both)."""
    from testkit.postgres import PostgresServer, missing_reason, server_bindir

    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    server = PostgresServer(server_bindir()).start()
    try:
        yield server
    finally:
        server.stop()


# --- Ray: a cluster of real nodes on this machine (testkit.cluster.ray_nodes), one per test module -------------
@pytest.fixture(scope="module")
def ray_cluster():
    """Two Ray nodes on this machine, CPU only: the head (custom resource `lab_node_head`, the Jobs API at
    `.address`) and a second raylet joined with `ray start --address` (`lab_node_b`). `.node_id(name)`,
    `.kill_raylet(name)`, `.wait_node_dead(name)`, `.add_node(name)`: testkit/cluster/ray_nodes.py."""
    yield from ray_nodes(("lab_node_b",))


def ray_nodes(node_names: tuple[str, ...]):
    """For a module fixture: the head and one raylet per name (testkit.cluster.ray_nodes.running_cluster), with
    the suite's PostgreSQL password in the nodes' environment; skipped when Ray is not installed."""
    pytest.importorskip("ray.job_submission", reason="Ray is not installed (pip install -e '.[cluster]')")
    from testkit.cluster.ray_nodes import running_cluster
    from testkit.postgres import PASSWORD

    with running_cluster(node_names, env={"PYTHONPATH": str(REPO), "PGPASSWORD": PASSWORD}, cwd=REPO) as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """The URL (password included) of a new, empty database on the session's server."""
    return postgres_server.new_database()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store URL on each backend, for a module whose store tests all run on both (it overrides
    `db_url` with this); a single test takes helpers.BACKENDS instead."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'lab.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def store(db_url: str):
    from storage import make_store

    store = make_store(db_url)
    yield store
    store.dispose()


@pytest.fixture(autouse=True)
def _lab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep logs/checkpoints of each test in its own folder, never in the checkout."""
    monkeypatch.setenv("RLVER_LAB_HOME", str(tmp_path / "lab_home"))
    monkeypatch.delenv("RLVER_LAB_DB", raising=False)


@pytest.fixture(autouse=True)
def _fresh_endpoint_limiters() -> None:
    """Each test starts with no per-endpoint traffic limiter: the process keeps one per base URL, and a test
    server may get a port an earlier test's server had, whose limiter would carry its counters and limits."""
    from simulator.llm import traffic

    with traffic._REGISTRY_LOCK:
        traffic._LIMITERS.clear()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~100K-parameter Qwen2 model with a byte-level BPE chat tokenizer, built offline."""
    from testkit.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny_model"))


# --- Browser tests: the whole lab on a free port, driven by headless Debian chromium (Playwright) ------------
CHROMIUM = "/usr/bin/chromium"
BROWSER_WAIT_MS = 90_000  # the longest a page action or an `expect` waits for its condition
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-dev-shm-usage"]


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory):
    """The lab (app.lab.build_app, startup done: built-in personas seeded) on a free 127.0.0.1 port with a
    fresh SQLite file. Yields its LabContext with `.url` added. One launch per test module."""
    from app.context import LabContext
    from app.lab import build_app, launch, startup
    from storage import make_store

    home = tmp_path_factory.mktemp("lab_server")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLVER_LAB_HOME", str(home / "lab_home"))
        mp.setenv("RLVER_LAB_PLAN_ON_OPEN", "0")  # opening Training plans nothing: no probe steals the cores
        url = f"sqlite:///{home / 'lab.db'}"
        store = make_store(url)
        startup(store)
        ctx = LabContext(store=store, store_url=url)
        demo = build_app(ctx)
        port = free_port()
        launch(demo, port=port, prevent_thread_lock=True, quiet=True)
        ctx.url = f"http://127.0.0.1:{port}/"
        try:
            yield ctx
        finally:
            demo.close()
            store.dispose()


@pytest.fixture(scope="module")
def browser_page(lab_server):
    """A headless chromium page (Playwright sync API) opened on the lab; JS dialogs are recorded in
    `page.dialogs` (and dismissed) so a test can assert none fired."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found (apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.dialogs = []

        def _on_dialog(dialog) -> None:
            page.dialogs.append(dialog.message)
            dialog.dismiss()

        page.on("dialog", _on_dialog)
        # every wait is on a condition, with limits generous enough for a busy 2-core machine
        page.set_default_timeout(BROWSER_WAIT_MS)
        expect.set_options(timeout=BROWSER_WAIT_MS)
        page.goto(lab_server.url)
        page.wait_for_selector(".gradio-container", state="attached")
        try:
            yield page
        finally:
            browser.close()


def make_sim_profile(pid: str = "maya", language: str = "en", personality: str = "avoidant", **kw):
    """An English simulated-user profile with the `extra` keys the built-in personas carry
    (events, fit_examples, miss_examples), for simulator tests."""
    from simulator.personas.profile import Profile

    extra = {"events": ["I covered forty extra night shifts when the ward was short.",
                        "I trained Jenna, and now she's my boss.",
                        "My manager said I was 'too valuable on the floor' to promote.",
                        "I rewrote the handover checklist that everybody uses now.",
                        "My mum just asked why I don't find an easier job."],
             "fit_examples": ["Covering forty extra night shifts while training Jenna is genuinely impressive; you kept that ward running.",
                              "Rewriting the handover checklist everyone uses is a real achievement, and it shows how much you care.",
                              "You held the ward together through the hardest year; that was skilled, generous work."],
             "miss_examples": ["Maybe you should ask what you could have done better to get promoted.",
                               "Well, promotions are political, nothing you can do.",
                               "Have you considered just finding an easier job?"]}
    fields = dict(id=pid, name="Maya", persona="Maya, 34, a nurse on night shifts; dry humour, short sentences.",
                  background="Maya was passed over for a promotion she had been promised. I trained the person who got it.",
                  hidden_need="She wants someone to sincerely praise what she actually did during the hard year.",
                  need_category="sincere_praise", personality=personality, traits=["proud", "tired", "sarcastic"],
                  first_line="So, funny thing happened at work today. Not really funny.", language=language, extra=extra)
    fields.update(kw)
    return Profile(**fields).validate()


@pytest.fixture
def sim_profile():
    return make_sim_profile()


@pytest.fixture
def grid_rows():
    """read(page, elem_id) -> the data rows of a gr.Dataframe as lists of cell texts (its virtual grid)."""
    def read(page, elem_id: str) -> list[list[str]]:
        return page.evaluate(
            """(id) => Array.from(document.querySelectorAll(`#${id} [role=row]`))
                 .filter(r => r.querySelector('[role=gridcell]'))
                 .map(r => Array.from(r.querySelectorAll('[role=gridcell]')).map(c => c.innerText.trim()))""",
            elem_id)
    return read


@pytest.fixture
def screenshot():
    """`screenshot(page, "name.png")` saves a full-page PNG when RLVER_SCREENSHOTS names a folder
    (`RLVER_SCREENSHOTS=docs/screenshots make test` refreshes the README's pictures); otherwise nothing."""

    def save(page, name: str, full_page: bool = True) -> None:
        folder = os.environ.get("RLVER_SCREENSHOTS")
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(folder) / name), full_page=full_page)

    return save
