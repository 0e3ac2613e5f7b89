"""Every path a web caller can name goes through one check (docs/security.md, "Paths"): the config fields
that name files, folders or endpoints are declared once (simulator.access.path_field) and Access checks each
declared one. Listed here by a name-and-type heuristic over TrainConfig, BenchmarkConfig, CompareConfig, the
grid keys and the views' form fields, so a new path-like field that is not declared fails this test. A
refused path gets one message whether it exists or not, and nothing of a refused file is echoed."""
from __future__ import annotations

import dataclasses
import re

import pytest

from app.services import benchmark_form, compare_jobs
from app.services import training as training_service
from simulator.access import ACCESS_ENV, Access, config_errors, current_access, declared_fields, known_kinds
from trainer.benchmarking.benchmark import BenchmarkConfig
from trainer.benchmarking.compare import CompareConfig
from trainer.config import TrainConfig
from trainer.experiments.grid import GRID_KEYS, JUDGE_KEYS, ExperimentError, parse_grid

CONFIGS = (TrainConfig, BenchmarkConfig, CompareConfig)
PATH_LIKE = re.compile(r"model|path|dir|file|config|checkpoint|pack|profiles|persona|policy|simulator|url|^[ab]$|"
                       r"replay|folder|home|^log|_log$")
# string fields whose names look like paths but that name none (each with what it names instead)
NOT_PATHS = {"simulator_preset": "a rule set of simulator.user.rules", "off_policy_estimator": "an estimator's name"}
REFUSED = "paths named from the web must lie inside the lab's folders"
SECRET = "SECRET-7d41c0-value"
# how a declared kind names a path (the value a visitor would type to reach `path`)
SPELL = {"policy": "{}", "personas": "file:{}", "simulator": "replay:{}", "pack": "sage:{}", "file": "{}",
         "folder": "{}"}


def path_like(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if PATH_LIKE.search(f.name) and "str" in str(f.type)}


def as_web(monkeypatch: pytest.MonkeyPatch) -> Access:
    access = Access.web(logged_in=False)
    monkeypatch.setenv(ACCESS_ENV, access.to_json())
    assert current_access() == access
    return access


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_path_like_config_field_is_declared(cls):
    declared = declared_fields(cls)
    undeclared = path_like(cls) - set(declared) - set(NOT_PATHS)
    assert not undeclared, f"{cls.__name__}: declare {sorted(undeclared)} with simulator.access.path_field"
    assert set(declared.values()) <= known_kinds()


def test_the_views_and_grids_name_paths_only_through_declared_fields():
    """A form field is a config field of the same name; the grid's own keys that name paths are checked by
    parse_grid (base_config) and its judge's endpoint through Access."""
    for names, cls in ((training_service.FORM_NAMES, TrainConfig), (benchmark_form.NAMES, BenchmarkConfig),
                       (compare_jobs.FIELDS, CompareConfig)):
        fields = {f.name for f in dataclasses.fields(cls)} | {"quick"}  # the Benchmark form's quick-look box
        assert set(names) <= fields, set(names) - fields
        assert (path_like(cls) & set(names)) - set(NOT_PATHS) <= set(declared_fields(cls))
    assert {k for k in GRID_KEYS if PATH_LIKE.search(k)} == {"base_config"}
    assert {k for k in JUDGE_KEYS if PATH_LIKE.search(k)} == {"model", "base_url"}  # a model name, an endpoint


@pytest.mark.parametrize("cls", [pytest.param(TrainConfig, marks=pytest.mark.model),  # checks the default model
                                 BenchmarkConfig, CompareConfig], ids=lambda c: c.__name__)
def test_each_declared_field_refuses_an_outside_path_alike_whether_it_exists_or_not(cls, tmp_path, monkeypatch):
    access = as_web(monkeypatch)
    there = tmp_path / "outside"
    there.mkdir()
    (there / "secret.yaml").write_text(f"seed: {SECRET}\n")
    for name, kind in declared_fields(cls).items():
        if kind == "endpoint":
            continue  # endpoints: tests/test_endpoints.py
        messages = []
        for target in (there / "secret.yaml", there / "missing.yaml", there, tmp_path / "no-such-folder"):
            value = SPELL[kind].format(target)
            refused = config_errors(cls(**{name: value}), access)
            assert REFUSED in refused.get(name, ""), (cls.__name__, name, value, refused)
            everything = cls(**{name: value}).errors() if cls is not TrainConfig else \
                cls(**{name: value}).errors(check_paths=True)
            assert SECRET not in str(everything) and "secret.yaml" not in everything.get(name, "")
            messages.append(everything.get(name) if cls is not CompareConfig else refused[name])
        assert len(set(messages)) == 1, (cls.__name__, name, messages)  # existence never told


@pytest.mark.model
def test_a_grids_base_config_and_deepspeed_config_outside_the_lab_are_refused_unread(tmp_path, monkeypatch):
    as_web(monkeypatch)
    secret = tmp_path / "secret.yaml"
    secret.write_text(f"seed: {SECRET}\nsteps: 3\nnot_a_setting: {SECRET}\n")
    secret.chmod(0o600)
    said = []
    for ref in (secret, tmp_path / "missing.yaml"):
        with pytest.raises(ExperimentError) as caught:
            parse_grid(f"name: g\nbase_config: {ref}\ngrid: {{seed: [0]}}\n")
        said.append(caught.value.errors.get("base_config"))
        assert SECRET not in str(caught.value.errors) and "not_a_setting" not in str(caught.value.errors)
    assert said[0] == said[1] and REFUSED in said[0]
    with pytest.raises(ExperimentError) as caught:
        parse_grid(f"name: g\nbase: {{deepspeed_config: {secret}}}\ngrid: {{seed: [0]}}\n", check_paths=False)
    assert any(key.endswith("deepspeed_config") and REFUSED in problem for key, problem in caught.value.errors.items())
