"""One way to name a policy and a simulated user: PolicySpec and SimulatorSpec validate once, name the field
that is wrong, and every entry point (trainer rollout, the live view, the benchmark, the chat command,
training's config) takes the same spec strings: a checkpoint folder as the policy, an OpenAI-compatible
simulator behind a real HTTP server, SAGE's own prompt pack and traffic limits."""
from __future__ import annotations

import io
import json
import shutil
import sys

import pytest

from app.views import live_rollout
from simulator.llm.traffic import TrafficLimits
from simulator.personas import store as persona_store
from simulator.user.spec import SimulatorSpec
from storage.dialogues import load_dialogue
from testkit.scripted_server import ScriptedServer
from trainer import __main__ as trainer_main
from trainer.benchmarking import benchmark
from trainer.config import TrainConfig
from trainer.policies.spec import PolicySpec, checkpoint_model
from trainer.rollout.build import SpecError, build_rollout


@pytest.fixture
def checkpoint(tmp_path, tiny_model_dir):
    """A training checkpoint folder as trainer.learning.checkpoints writes it: the model under policy/."""
    folder = tmp_path / "checkpoint-1"
    shutil.copytree(tiny_model_dir, folder / "policy")
    (folder / "trainer_state.json").write_text("{}")
    return folder


@pytest.mark.model
def test_spec_errors_name_the_field():
    assert set(SimulatorSpec("nope").errors()) == {"simulator"}
    assert set(SimulatorSpec(pack="sage:").errors()) == {"prompt_pack"}
    assert set(SimulatorSpec(rules="no-such-rules").errors()) == {"rules"}
    assert set(SimulatorSpec(traffic=TrafficLimits(max_in_flight=0)).errors()) == {"simulator_max_in_flight"}
    assert SimulatorSpec("offline", pack="rlver:/some/dir").errors() == {}  # rlver: is a pack everywhere
    assert PolicySpec("").error() and PolicySpec("openai:").error() and PolicySpec("default").error() == ""
    with pytest.raises(SpecError) as e:
        build_rollout(PolicySpec("openai:m"), SimulatorSpec(pack="nope"))
    assert e.value.field == "prompt_pack" and "unknown prompt pack 'nope'" in str(e.value)
    # the configs check packs with the same rule: the benchmark takes rlver:DIR as training does
    assert "prompt_pack" not in benchmark.BenchmarkConfig(prompt_pack="rlver:/x").errors()
    assert "prompt_pack" not in TrainConfig(prompt_pack="rlver:/x").errors()
    assert "prompt_pack" in benchmark.BenchmarkConfig(prompt_pack="zzz").errors()


def test_a_checkpoint_folder_stands_for_its_policy(checkpoint, tiny_model_dir):
    assert checkpoint_model(str(checkpoint)) == str(checkpoint / "policy")
    assert checkpoint_model(f"vllm:{checkpoint}") == f"vllm:{checkpoint / 'policy'}"
    assert checkpoint_model(str(tiny_model_dir)) == str(tiny_model_dir)  # a model folder is itself
    assert checkpoint_model("openai:gpt") == "openai:gpt"


def test_every_entry_point_takes_the_same_specs(shared_reference, store, db_url, checkpoint, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    persona_store.seed_builtin(store)
    persona = persona_store.list_profiles(store)[0].id
    pack = f"sage:{shared_reference / 'sage'}"
    with ScriptedServer().start() as srv:
        def sage_steps() -> int:
            return srv.roles.get("sage_emotion", 0)

        # trainer rollout
        code = trainer_main.main(["rollout", "--persona", persona, "--policy", str(checkpoint),
                                  "--simulator", "openai:deepseek-v3", "--simulator-base-url", srv.base_url,
                                  "--prompt-pack", pack, "--simulator-max-in-flight", "2", "--max-turns", "2",
                                  "--max-new-tokens", "8", "--db", db_url, "--json"])
        out = capsys.readouterr().out
        assert code == 0
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        assert len(rows) == 1 and rows[0]["status"] == "finished", rows
        after_cli = sage_steps()
        assert after_cli > 0

        # the live view
        outs = list(live_rollout.start_rollout(store, "specs", [persona], str(checkpoint), "", "openai:deepseek-v3",
                                               srv.base_url, "standard", "direct", 1, 2, 8, 1.0, 0, pack=pack,
                                               simulator_max_in_flight=2, simulator_requests_per_minute=600))
        assert outs[-1][0].startswith("Done:"), outs[-1][0]
        after_live = sage_steps()
        assert after_live > after_cli

        # the benchmark
        cfg = benchmark.BenchmarkConfig(policy=str(checkpoint), simulator="openai:deepseek-v3",
                                        simulator_base_url=srv.base_url, prompt_pack=pack, simulator_max_in_flight=2,
                                        profiles=persona, max_new_tokens=8)
        result = benchmark.run_benchmark(store, cfg, log=lambda _m: None)
        assert result.summary.n == 1 and result.summary.n_errors == 0
        assert sage_steps() > after_live

    # every stored dialogue names SAGE's pack in its simulator fingerprint, and the policy's model folder
    ids = [rows[0]["id"], *result.dialogue_ids]
    for did in ids:
        d = load_dialogue(store, did)
        assert d["simulator_fingerprint"]["prompt_pack"]["pack"] == "sage", d["simulator_fingerprint"]
    # training's config names the simulated user with the same fields
    train = SimulatorSpec.from_config(TrainConfig(simulator="openai:deepseek-v3", simulator_base_url="http://h/v1",
                                                  prompt_pack=pack, simulator_max_in_flight=2))
    bench = SimulatorSpec.from_config(cfg, rules=train.rules)
    assert (train.spec, train.pack, train.traffic.max_in_flight) == (bench.spec, bench.pack, 2)


def test_the_chat_command_takes_the_simulator_spec(shared_reference, db_url, monkeypatch, capsys):
    from simulator.cli import chat as chat_cli

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    with ScriptedServer().start() as srv:
        monkeypatch.setattr(sys, "stdin", io.StringIO("I am listening. Tell me more.\n"))
        code = chat_cli.main(["--persona", "en-03-aisha-bello", "--backend", "openai:deepseek-v3", "--base-url",
                              srv.base_url, "--prompt-pack", f"sage:{shared_reference / 'sage'}", "--db", db_url,
                              "--quiet"])
        assert code == 0, capsys.readouterr().err
        assert srv.roles.get("sage_emotion", 0) >= 1
    bad = chat_cli.main(["--persona", "en-03-aisha-bello", "--prompt-pack", "nope", "--db", db_url])
    assert bad == 2 and "prompt_pack" in capsys.readouterr().err
