"""A tiny random chat model built fully offline, for tests and quick demos.

A byte-level BPE is trained with `tokenizers` on a small built-in English corpus, wrapped in
PreTrainedTokenizerFast with a ChatML chat template (the format SmolLM2 and Qwen2 use), and paired with a
randomly initialised Qwen2 of ~100K parameters (hidden 64, 2 layers, 2 heads of 64/2 = 32 dims:
vLLM's CPU attention has no kernel for 16-dim heads, so 4 heads would not run there). Its replies are gibberish, but every code path of the
engines, the rollout and training runs on it in well under a second.
"""
from __future__ import annotations

import json
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
_CORPUS = """\
I had a rough week at work and my manager did not notice any of the extra hours I put in.
That sounds exhausting. It makes sense that you feel unseen after giving so much.
My sister forgot my birthday again, and I keep telling myself it does not matter.
<think>She is hurt but downplays it; I should name the hurt gently.</think>It sounds like it does matter to you.
I failed the exam even though I studied every night. I feel so stupid.
You are not stupid. Studying every night shows real commitment, and one exam does not define you.
My friend cancelled our plans for the third time this month.
<think>The user feels rejected. Listen first, then ask what they need.</think>That would sting. How are you feeling about the friendship?
Thank you for listening. I feel a little better now. Goodbye.
I am glad it helped. Take care of yourself, and come back any time.
The weather was grey and the train was late, so I walked home in the rain.
Sometimes small things pile up until the whole day feels heavy.
What would help you most right now: advice, or just someone to hear you out?
I think I just need to vent for a while. Nobody at home wants to hear it.
""" * 4


def build_tiny_model(path: str | Path, vocab_size: int = 512, seed: int = 0, hidden_size: int = 64,
                     num_layers: int = 2) -> Path:
    """Build (once per `path`) a tiny Qwen2 chat model + tokenizer and return the folder. `hidden_size` and
    `num_layers` make a wider or deeper random model (e.g. a learner whose update takes real time)."""
    out = Path(path)
    if (out / "config.json").exists() and (out / "tokenizer.json").exists() and \
            (out / "model.safetensors").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(_CORPUS.splitlines(), trainer=trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=None, eos_token="<|im_end|>",
                                  pad_token="<|endoftext|>", unk_token=None)
    tok.chat_template = CHATML_TEMPLATE
    tok.save_pretrained(out)

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
        tie_word_embeddings=True, bos_token_id=tok.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, torch_dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out, safe_serialization=True)
    (out / "README.txt").write_text(json.dumps({"kind": "rlver-lab tiny test model", "seed": seed,
                                                "parameters": model.num_parameters()}) + "\n")
    return out
