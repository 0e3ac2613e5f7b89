"""Policy engines: transformers (tiny model), OpenAI (a real local HTTP server), model resolution."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import torch

from trainer.policies import SamplingConfig, make_policy_engine
from trainer.policies.hf_engine import HFEngine
from trainer.policies.base import resolve_policy

CHATS = [[{"role": "user", "content": "hi"}],
         [{"role": "system", "content": "Be kind and brief."},
          {"role": "user", "content": "My friend cancelled our plans for the third time this month."}],
         [{"role": "user", "content": "I failed the exam."}]]


@pytest.fixture(scope="module")
def hf(tiny_model_dir):
    return make_policy_engine(str(tiny_model_dir))


def _recompute(engine, prompt, sampled, temperature=1.0):
    ids = torch.tensor([prompt + sampled])
    with torch.inference_mode():
        logits = engine.model(ids).logits[0, len(prompt) - 1:-1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(sampled)[:, None])[:, 0]


def test_left_padded_batch_matches_one_by_one(hf):
    greedy = SamplingConfig(temperature=0, max_new_tokens=6)
    batch = hf.generate(CHATS, greedy)
    for chat, g in zip(CHATS, batch):
        [alone] = hf.generate([chat], greedy)
        assert g.token_ids == alone.token_ids and g.prompt_ids == alone.prompt_ids
        assert g.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
        assert g.prompt_ids == hf.encode_chat(chat) and g.finish_reason == "length"
        assert g.text == hf.decode(g.token_ids)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_match_training_recomputation(hf, temperature):
    gens = hf.generate(CHATS, SamplingConfig(temperature=temperature, max_new_tokens=8, seed=5))
    for g in gens:
        assert len(g.logprobs) == len(g.token_ids) == 8
        expected = _recompute(hf, g.prompt_ids, g.token_ids, temperature)
        assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-4)


def test_seed_reproducible_and_stop_ids_end_the_reply(hf, tiny_model_dir):
    p = SamplingConfig(max_new_tokens=6, seed=11)
    assert [g.token_ids for g in hf.generate(CHATS, p)] == [g.token_ids for g in hf.generate(CHATS, p)]
    [ref] = hf.generate(CHATS[:1], SamplingConfig(max_new_tokens=6, seed=4))
    k = max(i for i, t in enumerate(ref.token_ids) if t not in ref.token_ids[:i])
    stopper = HFEngine(tiny_model_dir, model=hf.model, tokenizer=hf.tokenizer)
    stopper._stop_ids = [ref.token_ids[k]]
    [g] = stopper.generate(CHATS[:1], SamplingConfig(max_new_tokens=6, seed=4))
    assert g.token_ids == ref.token_ids[:k + 1] and g.finish_reason == "stop"  # the stop id is kept


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_per_prompt_seeds_make_a_reply_independent_of_its_batch(hf, top_p):
    """With one seed per prompt a row samples the same ids alone or beside others; the log-probs follow the
    convention of base.py (softmax(logits / T) over the top-p nucleus), and other seeds sample otherwise."""
    ids = [hf.encode_chat(c) for c in CHATS]
    params = SamplingConfig(temperature=0.8, top_p=top_p, max_new_tokens=8)
    batch = hf.generate_ids(ids, params, seeds=[11, 12, 13])
    for row, seed in enumerate((11, 12, 13)):
        [alone] = hf.generate_ids(ids[row:row + 1], params, seeds=[seed])
        assert alone.token_ids == batch[row].token_ids
        assert alone.logprobs == pytest.approx(batch[row].logprobs, abs=1e-4)
    assert [g.token_ids for g in hf.generate_ids(ids, params, seeds=[21, 22, 23])] != [g.token_ids for g in batch]
    for g in batch:
        expected = _recompute(hf, g.prompt_ids, g.token_ids, 0.8)
        if top_p == 1.0:
            assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-4)
        else:  # renormalised over the nucleus: at least the full distribution's log-prob
            assert all(lp >= e - 1e-4 for lp, e in zip(g.logprobs, expected.tolist()))
    with pytest.raises(ValueError, match="seeds: 2 seeds for 3 prompts"):
        hf.generate_ids(ids, params, seeds=[1, 2])


def test_bad_inputs_are_named(hf, tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        make_policy_engine(str(tmp_path / "missing"))
    (tmp_path / "enc").mkdir()
    (tmp_path / "enc" / "config.json").write_text(json.dumps({"architectures": ["BertModel"]}))
    with pytest.raises(ValueError, match="not a causal LM"):
        resolve_policy(str(tmp_path / "enc"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no config.json"):
        resolve_policy(str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="policy must be"):
        make_policy_engine("")
    with pytest.raises(ValueError, match="top_p"):
        hf.generate(CHATS, SamplingConfig(top_p=0))
    with pytest.raises(ValueError, match="max_new_tokens"):
        SamplingConfig(max_new_tokens=0).validate()
    with pytest.raises(ValueError, match="role"):
        hf.generate([[{"role": "robot", "content": "x"}]], SamplingConfig())
    assert hf.generate([], SamplingConfig()) == []


class _ChatHandler(BaseHTTPRequestHandler):
    seen: list = []

    def do_POST(self):  # noqa: N802 - http.server naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _ChatHandler.seen.append((self.path, self.headers.get("Authorization"), body))
        last = body["messages"][-1]["content"]
        if last == "fail":
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "boom"}}')
            return
        payload = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                   "choices": [{"index": 0, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": f"echo: {last}"}}],
                   "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}}
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_openai_engine_against_a_local_server(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
        engine = make_policy_engine("openai:tiny-chat", max_retries=0)
        assert engine.supports_token_ids is False and "127.0.0.1" in engine.model_ref
        gens = engine.generate([[{"role": "user", "content": "hello"}], [{"role": "user", "content": "fail"}]],
                               SamplingConfig(temperature=0.5, max_new_tokens=7, seed=3))
        assert gens[0].text == "echo: hello" and gens[0].finish_reason == "stop" and gens[0].token_ids == []
        assert gens[1].finish_reason == "error" and "500" in gens[1].error
        path, auth, body = next(s for s in _ChatHandler.seen if s[2]["messages"][-1]["content"] == "hello")
        assert path == "/v1/chat/completions" and auth == "Bearer test-key"
        assert body["model"] == "tiny-chat" and body["max_tokens"] == 7 and body["seed"] == 3
        with pytest.raises(NotImplementedError):
            engine.generate_ids([[1, 2]], SamplingConfig())
    finally:
        server.shutdown()
        server.server_close()


def test_openai_engine_needs_a_key_for_the_public_api(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        make_policy_engine("openai:gpt-4o")


@pytest.mark.model
@pytest.mark.slow
def test_default_model_is_converted_once_and_generates():
    from simulator.llm.models import default_model_dir

    path = default_model_dir()
    assert (path / "model.safetensors").exists() and (path / "DONE").exists()
    assert resolve_policy("default") == path
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config
    engine = make_policy_engine("default")
    [g] = engine.generate([[{"role": "user", "content": "Say hello."}]], SamplingConfig(temperature=0,
                                                                                         max_new_tokens=8))
    assert g.text.strip() and len(g.token_ids) <= 8
    expected = _recompute(engine, g.prompt_ids, g.token_ids)
    assert torch.allclose(torch.tensor(g.logprobs), expected, atol=1e-3)


def test_models_load_side_by_side_in_threads(tiny_model_dir):
    """transformers' loading is not thread-safe (meta tensors left behind); the lab's loads share one lock, as
    the app loads a policy while the simulated user's scorer loads."""
    import threading

    from simulator.llm.models import load_causal_lm

    errors: list[str] = []

    def load() -> None:
        try:
            load_causal_lm(tiny_model_dir).to("cpu").eval()
        except Exception as exc:  # noqa: BLE001 - any failure is the finding
            errors.append(repr(exc))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


@pytest.mark.parametrize("decode", ["generate", "static"])
def test_a_token_listener_sees_each_row_grow_before_generate_returns(hf, decode):
    """The transformers engine hands every decoding step's tokens so far (the static path: every few steps), per
    row and with whose turn each row is, to its token_listener; the last call holds each reply as returned (up to
    its stop id)."""
    if decode == "static":
        hf = HFEngine(hf.path, model=hf.model, tokenizer=hf.tokenizer, decode="static")
    calls = []
    hf.token_listener = lambda keys, rows: calls.append((list(keys), [list(r) for r in rows]))
    hf.batch_keys = ["dlg-a", "dlg-b"]
    try:
        prompts = [hf.encode_text("hello there"), hf.encode_text("how are you today")]
        gens = hf.generate_ids(prompts, SamplingConfig(temperature=1.0, max_new_tokens=12), seeds=[1, 2])
    finally:
        hf.token_listener, hf.batch_keys = None, None
    assert len(calls) >= 2 and all(keys == ["dlg-a", "dlg-b"] for keys, _ in calls)
    assert [len(r) for r in calls[0][1]] == [1, 1]  # the first step: one token a row, the prompt skipped
    for row, g in enumerate(gens):
        assert calls[-1][1][row] == [t for t in g.token_ids if t not in hf._stop_ids]
        lengths = [len(rows[row]) for _, rows in calls]
        assert lengths == sorted(lengths)  # only ever grows


@pytest.mark.parametrize("decode", ["generate", "static"])
def test_a_stopped_batch_sends_its_last_tokens_to_the_listener_once(hf, decode):
    """A batch stopped part way (the engine's stop event, set here by the listener's second call) ends early, and
    the listener is not handed the same tokens twice."""
    if decode == "static":
        hf = HFEngine(hf.path, model=hf.model, tokenizer=hf.tokenizer, decode="static")
    calls = []

    def listen(keys, rows):
        calls.append([list(r) for r in rows])
        if len(calls) == 2:
            hf.stop_event.set()

    hf.token_listener, hf.batch_keys, hf.stop_event = listen, ["dlg-a", "dlg-b"], threading.Event()
    try:
        prompts = [hf.encode_text("hello there"), hf.encode_text("how are you today")]
        gens = hf.generate_ids(prompts, SamplingConfig(temperature=1.0, max_new_tokens=48), seeds=[1, 2])
    finally:
        hf.token_listener, hf.batch_keys, hf.stop_event = None, None, None
    assert max(len(g.token_ids) for g in gens) < 48
    assert all(a != b for a, b in zip(calls, calls[1:]))
