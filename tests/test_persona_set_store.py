"""Stored persona sets on a real SQLite file: made from filters / a generation / an import, the stratified
split, export round trips, set:NAME wherever personas are named, hashes recorded by runs, coverage, the CLI."""
from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import pytest
from helpers import tiny_train_config, trainer_run
from sqlalchemy import select

from simulator.__main__ import main as simulator_main
from simulator.personas import sets as persona_sets
from simulator.personas import store as persona_store
from simulator.personas.coverage import coverage
from simulator.personas.io import import_profiles
from simulator.personas.profile import NEED_CATEGORIES, PERSONALITIES
from simulator.personas.specs import PersonaSpecError, members_hash, resolve_personas, spec_error
from storage import Job, make_store, read_scope

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def seeded_store(store):
    persona_store.seed_builtin(store)
    return store


def test_sets_from_filters_keep_the_matching_personas_and_what_made_them(seeded_store):
    s = persona_sets.create_from_filters(seeded_store, "avoidant-en", personality="avoidant", language="en")
    members = persona_sets.set_profiles(seeded_store, "avoidant-en")
    assert s.size == len(members) > 0 and all(p.personality == "avoidant" for p in members)
    assert len(members) == len(persona_store.list_profiles(seeded_store, personality="avoidant", language="en"))
    assert (s.source_kind, s.params) == ("filter", {"filters": {"personality": "avoidant", "language": "en"}})
    held = persona_sets.create_from_filters(seeded_store, "held", split="heldout", need="just_listen")
    assert [p.extra["split"] for p in persona_sets.set_profiles(seeded_store, "held")] == ["heldout"] * held.size
    ids = [p.id for p in members[:3]][::-1]
    picked = persona_sets.create_from_filters(seeded_store, "picked", ids=ids).name
    assert [p.id for p in persona_sets.set_profiles(seeded_store, picked)] == ids
    assert persona_sets.set_summary(seeded_store, "picked").source_kind == "manual"
    assert persona_sets.create_from_filters(seeded_store, "by-text", search=members[0].name).size >= 1
    with pytest.raises(persona_sets.SetError, match="name: a set named 'held' already exists"):
        persona_sets.create_from_filters(seeded_store, "held", need="just_listen")
    with pytest.raises(persona_sets.SetError, match="members: .* would be empty"):
        persona_sets.create_from_filters(seeded_store, "none", search="no persona says this")
    with pytest.raises(persona_sets.SetError, match="ids: not in the store: nope"):
        persona_sets.create_from_filters(seeded_store, "bad", ids=["nope"])
    assert persona_sets.set_names(seeded_store) == ["avoidant-en", "by-text", "held", "picked"]


def test_generation_and_import_sets(seeded_store, tmp_path):
    for p in persona_store.list_profiles(seeded_store)[:2]:
        p.extra = {**p.extra, "generation_id": 7}
        persona_store.save_profile(seeded_store, p, create=False)
    assert persona_sets.create_from_generation(seeded_store, "gen7", 7).size == 2
    with pytest.raises(persona_sets.SetError, match="generation: no stored persona comes from generation 8"):
        persona_sets.create_from_generation(seeded_store, "gen8", 8)
    path = tmp_path / "two.jsonl"
    rows = [dict(p.to_dict(), id=f"imp-{i}") for i, p in enumerate(persona_store.list_profiles(seeded_store)[:2])]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = persona_store.import_file(seeded_store, path)
    s = persona_sets.create_from_import(seeded_store, "imported", path, [p.id for p in report.profiles])
    assert (s.size, s.source_kind, s.params["file"]) == (2, "import", "two.jsonl")
    assert [p.id for p in persona_sets.set_profiles(seeded_store, "imported")] == ["imp-0", "imp-1"]


def test_hash_changes_when_a_member_changes_and_runs_see_it(seeded_store):
    s = persona_sets.create_from_filters(seeded_store, "negative", personality="negative")
    assert s.current_hash == s.content_hash and not s.changed
    before = resolve_personas("set:negative", seeded_store)
    assert members_hash(before) == s.content_hash
    edited = before[0]
    edited.background += " She has also just moved house."
    persona_store.save_profile(seeded_store, edited, create=False)
    now = persona_sets.set_summary(seeded_store, "negative")
    assert now.content_hash == s.content_hash and now.current_hash != s.content_hash and now.changed
    assert members_hash(resolve_personas("set:negative", seeded_store)) == now.current_hash
    persona_store.delete_profile(seeded_store, before[1].id)
    assert persona_sets.set_summary(seeded_store, "negative").missing == [before[1].id]
    with pytest.raises(PersonaSpecError, match=f"deleted from the store since it was made: {before[1].id}"):
        resolve_personas("set:negative", seeded_store)


def test_split_is_stratified_and_deterministic(seeded_store):
    persona_sets.create_from_filters(seeded_store, "all")
    parent = persona_sets.set_profiles(seeded_store, "all")
    train, heldout = persona_sets.split_set(seeded_store, "all", 0.8, seed=5)
    assert (train.name, heldout.name, train.source_kind) == ("all-train", "all-heldout", "split")
    assert train.params == {"parent": "all", "parent_hash": members_hash(parent), "seed": 5, "fraction": 0.8,
                            "strata": ["need_category", "personality"], "side": "train"}
    a, b = persona_sets.set_profiles(seeded_store, "all-train"), persona_sets.set_profiles(seeded_store, "all-heldout")
    assert sorted(p.id for p in a + b) == sorted(p.id for p in parent) and not {p.id for p in a} & {p.id for p in b}
    strata = {}
    for p in parent:
        strata.setdefault((p.need_category, p.personality), []).append(p.id)
    assert (len(a), len(b)) == (26, 6)  # round(0.8 x 32) to train
    for ids in strata.values():  # each stratum of n holds floor or ceil of 0.8 n on the train side
        assert len(set(ids) & {p.id for p in a}) in (math.floor(0.8 * len(ids)), math.ceil(0.8 * len(ids)))
    again = persona_sets.stratified_split(parent, 0.8, 5)
    assert ([p.id for p in again[0]], [p.id for p in again[1]]) == ([p.id for p in a], [p.id for p in b])
    other = persona_sets.stratified_split(parent, 0.8, 6)
    assert [p.id for p in other[0]] != [p.id for p in a]
    # a larger stratum is cut at the fraction
    many = [type(parent[0])(**{**parent[0].to_dict(), "id": f"m{i}"}) for i in range(10)]
    tr, ho = persona_sets.stratified_split(many, 0.8, 0)
    assert (len(tr), len(ho)) == (8, 2)
    with pytest.raises(persona_sets.SetError, match="name: a set named 'all-train' already exists"):
        persona_sets.split_set(seeded_store, "all", 0.8, seed=1)
    with pytest.raises(persona_sets.SetError, match="fraction: must be between 0 and 1"):
        persona_sets.split_set(seeded_store, "all", 1.0, seed=1)
    assert persona_sets.set_names(seeded_store) == ["all", "all-heldout", "all-train"]  # nothing half-written


@pytest.mark.parametrize("fmt", ["lab", "rlver", "sage"])
def test_export_round_trips_through_the_importer(seeded_store, tmp_path, fmt):
    persona_sets.create_from_filters(seeded_store, "passive", personality="passive")
    out = tmp_path / f"set.{fmt}.jsonl"
    n = persona_sets.export_set(seeded_store, "passive", out, fmt)
    report = import_profiles(out)
    assert report.errors == [] and n == len(report.profiles)
    stored = persona_sets.set_profiles(seeded_store, "passive")
    assert [p.to_dict() for p in report.profiles] == [p.to_dict() for p in stored]
    if fmt == "sage":
        assert all("first_talk" in json.loads(line) for line in out.read_text().splitlines())


def test_sage_export_refuses_a_profile_without_a_first_line(seeded_store, tmp_path):
    p = persona_store.list_profiles(seeded_store)[0]
    p.first_line = ""
    persona_store.save_profile(seeded_store, p, create=False)
    persona_sets.create_from_filters(seeded_store, "one", ids=[p.id])
    with pytest.raises(ValueError, match="first_line: is required for SAGE"):
        persona_sets.export_set(seeded_store, "one", tmp_path / "x.jsonl", "sage")
    assert not (tmp_path / "x.jsonl").exists()


def test_set_specs_resolve_everywhere_with_clear_errors(seeded_store, db_url, monkeypatch):
    persona_sets.create_from_filters(seeded_store, "listen", need="just_listen")
    ids = [p.id for p in persona_sets.set_profiles(seeded_store, "listen")]
    assert [p.id for p in resolve_personas("set:listen", seeded_store)] == ids
    extra = persona_store.list_profiles(seeded_store, need="useful_advice")[0].id
    assert [p.id for p in resolve_personas(["set:listen", extra], seeded_store)] == ids + [extra]
    with pytest.raises(PersonaSpecError, match="no stored persona set named 'nope'; stored sets: listen"):
        resolve_personas("set:nope", seeded_store)
    monkeypatch.setenv("RLVER_LAB_DB", db_url)  # commands without --db (probe, lint) read the default store
    assert [p.id for p in resolve_personas("set:listen")] == ids
    assert spec_error("set:listen") == "" and "needs a set name" in spec_error("set:")


def test_coverage_counts_every_cell_and_names_the_empty_ones(seeded_store):
    profiles = persona_store.list_profiles(seeded_store, need="just_listen")
    cov = coverage(profiles)
    assert cov.n == len(profiles) and sum(map(sum, cov.total())) == len(profiles)
    row = cov.total()[list(NEED_CATEGORIES).index("just_listen")]
    assert row == [sum(p.personality == t for p in profiles) for t in PERSONALITIES]
    empty = cov.empty()
    assert len(empty) == len(NEED_CATEGORIES) * len(PERSONALITIES) - sum(c > 0 for c in row)
    assert ("useful_advice", "negative", "") in empty
    by_lang = coverage(profiles, by_language=True)
    assert by_lang.languages == ("en", "zh") and sum(map(sum, by_lang.counts["zh"])) == 0
    assert {"need_category": "just_listen", "personality": "negative", "language": "zh"} in by_lang.to_dict()["empty"]


def test_new_tables_are_added_to_an_existing_store_file(tmp_path):
    path = tmp_path / "old.db"
    make_store(f"sqlite:///{path}").dispose()
    with sqlite3.connect(path) as con:  # a store from before persona sets (and migrations)
        con.executescript("DROP TABLE persona_set_member; DROP TABLE persona_set; DROP TABLE alembic_version;")
    make_store(f"sqlite:///{path}").dispose()
    with sqlite3.connect(path) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"persona_set", "persona_set_member"} <= tables


@pytest.mark.process
def test_sets_cli(seeded_store, db_url, tmp_path, capsys):
    def cli(*args):
        code = simulator_main(["personas", "sets", *args, "--db", db_url])
        out = capsys.readouterr()
        return code, out.out, out.err

    assert cli("create", "en", "--language", "en")[0] == 0
    code, out, _ = cli("split", "en", "--fraction", "0.8", "--seed", "3")
    assert code == 0 and "created set en-train" in out and "created set en-heldout" in out
    code, out, _ = cli("list", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["name"] for r in rows] == ["en", "en-heldout", "en-train"]
    assert rows[0]["size"] == rows[1]["size"] + rows[2]["size"] and rows[2]["source_kind"] == "split"
    code, out, _ = cli("show", "en-train", "--json")
    shown = json.loads(out)
    assert shown["params"]["seed"] == 3 and len(shown["members"]) == rows[2]["size"]
    code, out, _ = cli("coverage", "en-heldout", "--json")
    assert json.loads(out)["n"] == rows[1]["size"]
    assert "empty cell(s)" in cli("coverage", "en")[1]
    target = tmp_path / "en.jsonl"
    assert cli("export", "en", str(target), "--format", "rlver")[0] == 0
    assert len(import_profiles(target).profiles) == rows[0]["size"]
    code, _, err = cli("split", "nope")
    assert code == 2 and "NAME: no stored persona set named 'nope'" in err
    code, _, err = cli("split", "en", "--fraction", "2")
    assert code == 2 and err.startswith("--fraction: must be between 0 and 1")
    code, _, err = cli("create", "x", "--ids", "a,b")
    assert code == 2 and err.startswith("--ids: not in the store: a, b")
    code, _, err = cli("create", "x", "--generation", "4", "--language", "en")
    assert code == 2 and err.startswith("--generation: cannot be combined")


@pytest.mark.model
def test_a_training_run_on_a_set_records_its_name_and_hash(seeded_store, db_url, tiny_model_dir, tmp_path):
    two = [p.id for p in persona_store.list_profiles(seeded_store)[:2]]
    s = persona_sets.create_from_filters(seeded_store, "tiny", ids=two)
    config = tiny_train_config(tmp_path, tiny_model_dir, persona_set="set:tiny", steps=1, dialogues_per_step=2)
    proc = trainer_run("train", "--config", str(config), "--db", db_url, "--json", env_home=tmp_path / "home")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with read_scope(make_store(db_url)) as session:
        job_config = session.scalars(select(Job.config)).one()
    assert job_config["persona_set"] == "set:tiny"
    assert job_config["personas"] == {"spec": "set:tiny", "set": "tiny", "n": 2, "hash": s.content_hash}
    from trainer.config import TrainConfig

    assert TrainConfig.from_dict(job_config).persona_set == "set:tiny"  # a clone / resume reads it back


def test_a_benchmark_on_a_set_records_its_name_and_hash(store, shared_data):
    """A replay of three published dialogues, their profiles named as a stored set."""
    from simulator.personas.transcript_files import profiles_from_transcripts
    from storage import EvalRun
    from trainer.benchmarking import benchmark

    f = shared_data / "sage" / "gpt-4.1_result.jsonl"
    for p in profiles_from_transcripts(f)[:3]:
        persona_store.save_profile(store, p, create=True)
    s = persona_sets.create_from_filters(store, "replayed", ids=[p.id for p in profiles_from_transcripts(f)[:3]])
    cfg = benchmark.BenchmarkConfig(policy=f"replay:{f}", simulator=f"replay:{f}", profiles="set:replayed")
    run_id = benchmark.run_benchmark(store, cfg, log=lambda _m: None).eval_run_id
    with read_scope(store) as session:
        run = session.get(EvalRun, run_id)
        config, n = dict(run.config), run.n
    assert n == 3 and config["profiles"] == "set:replayed"
    assert config["personas"] == {"spec": "set:replayed", "set": "replayed", "n": 3, "hash": s.content_hash}


def test_commands_read_set_specs_and_import_can_make_a_set(seeded_store, db_url, tmp_path, capsys):
    path = tmp_path / "three.jsonl"
    rows = [dict(p.to_dict(), id=f"new-{i}") for i, p in enumerate(persona_store.list_profiles(seeded_store)[:3])]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert simulator_main(["personas", "import", str(path), "--as-set", "fresh", "--db", db_url]) == 0
    assert "created set fresh: 3 persona(s)" in capsys.readouterr().out
    assert persona_sets.set_summary(seeded_store, "fresh").params == {"file": "three.jsonl", "n_imported": 3}
    assert simulator_main(["personas", "list", "--set", "set:fresh", "--json", "--db", db_url]) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["new-0", "new-1", "new-2"]
    assert simulator_main(["personas", "list", "--set", "set:stale", "--db", db_url]) == 2
    assert "--set: no stored persona set named 'stale'" in capsys.readouterr().err
