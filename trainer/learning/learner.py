"""The update half of RL training: policy (and PPO critic), advantages, and the clipped minibatch updates.

`Learner.update(batch)` is the whole algorithm for one batch of finished dialogues:

    old log-probs, values (and reference log-probs) recomputed on the sampled ids  (no grad)
    advantages: GAE (ppo) | GRPO | RLOO | REINFORCE++ | turn_grpo | turn_gae       (trainer.learning.algorithms)
    for each epoch, minibatch, micro-batch:
        policy loss = clipped surrogate - entropy_coef * entropy (+ kl_coef * KL to the reference);
                      tokens sampled by older weights (overlapped training) weighed by
                      pi_prox / pi_behaviour (trainer.learning.algorithms.decoupled_policy_loss)
        critic loss = clipped value loss                                            (ppo only)
    one optimizer step per minibatch (gradient clipped)

Token positions: logits at t predict token t+1, so every per-token tensor is [B, T-1] and
`action_mask[:, t]` says whether input_ids[:, t+1] was sampled by the policy. Log-probs use
log_softmax(logits / temperature), the convention of the policy engines (trainer/policies/base.py).
The batch itself (padded rows, make_batch) is built in trainer/learning/batch.py.
"""
from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import torch
from torch import Tensor, nn

from simulator.llm.models import MODEL_LOAD_LOCK, load_causal_lm
from trainer.config import TrainConfig
from trainer.learning import algorithms, turn_advantages
from trainer.learning.batch import Batch, make_batch, micro_batches  # noqa: F401 (callers import make_batch here)
from trainer.learning.batch import spread_turn_values, turn_table, values_at_turn_starts
from trainer.learning.checkpoints import safe_load
from trainer.learning.distributed import Optimized, all_reduce_max, all_reduce_sum, deepspeed_config, world
from trainer.learning.head_logprobs import model_logprobs

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}

# The metrics Learner.update returns, by name (means over its optimizer steps unless noted).
POLICY_LOSS = "policy_loss"  # the clipped surrogate loss
CLIP_FRAC = "clip_frac"  # share of policy tokens whose probability ratio was clipped
APPROX_KL = "approx_kl"  # KL(old || new) estimate of how far an update moved the policy
ENTROPY = "entropy"  # mean token entropy of the policy
KL_REF = "kl_ref"  # KL to the frozen reference (only with a reference model)
VALUE_LOSS = "value_loss"  # clipped critic loss (PPO only)
GRAD_NORM = "grad_norm"  # policy gradient norm before clipping
CRITIC_GRAD_NORM = "critic_grad_norm"  # (PPO only)
LOGPROB_MISMATCH = "logprob_mismatch"  # mean |recomputed - sampled| log-prob: engine / trainer numerics
ADVANTAGE_MEAN = "advantage_mean"  # mean advantage over policy tokens (all ranks)
ACTOR_LR = "actor_lr"  # the policy's learning rate after the update
UPDATES = "updates"  # optimizer steps taken (a count, not a mean)
# Only when the batch has stale tokens (sampled by weights older than the update's start: overlapped training)
STALE_TOKEN_SHARE = "stale_token_share"  # share of policy tokens that were stale
BEHAVIOUR_WEIGHT_MEAN = "behaviour_weight_mean"  # mean pi_prox / pi_behaviour over stale tokens (after the cap)
BEHAVIOUR_WEIGHT_CAPPED = "behaviour_weight_capped"  # share of stale tokens whose weight hit the cap
# What each micro-batch adds up (summed over micro-batches and ranks, in this order); _MISMATCH and _KNOWN
# make LOGPROB_MISMATCH and are not reported themselves.
_MISMATCH, _KNOWN = "_mismatch", "_known"
_STALE, _WEIGHT, _CAPPED, _TOKENS = "_stale", "_weight", "_capped", "_tokens"  # make the three above
MICRO_SUMS = (POLICY_LOSS, CLIP_FRAC, APPROX_KL, ENTROPY, KL_REF, VALUE_LOSS, _MISMATCH, _KNOWN, _STALE, _WEIGHT,
              _CAPPED, _TOKENS)


class ValueModel(nn.Module):
    """PPO critic: a transformer backbone (a copy of the policy, or another model) and a linear value head."""

    def __init__(self, path: str | Path, dtype: torch.dtype = torch.float32):
        super().__init__()
        from transformers import AutoModel

        with MODEL_LOAD_LOCK:
            self.backbone = AutoModel.from_pretrained(path, dtype=dtype)
        hidden = self.backbone.config.hidden_size
        self.v_head = nn.Linear(hidden, 1, dtype=dtype)
        head = Path(path) / "value_head.pt"
        if head.exists():  # a saved critic
            self.v_head.load_state_dict(safe_load(head))
        else:  # a fresh head predicts 0 for every state
            nn.init.zeros_(self.v_head.weight)
            nn.init.zeros_(self.v_head.bias)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.v_head(hidden).squeeze(-1).float()

    def save(self, path: Path, state_dict: Optional[dict[str, Tensor]] = None) -> None:
        self.backbone.save_pretrained(path, safe_serialization=True,
                                      state_dict=None if state_dict is None else
                                      {k[len("backbone."):]: v for k, v in state_dict.items() if k.startswith("backbone.")})
        head = self.v_head.state_dict() if state_dict is None else \
            {k[len("v_head."):]: v for k, v in state_dict.items() if k.startswith("v_head.")}
        torch.save(head, path / "value_head.pt")


def _lr_lambda(config: TrainConfig, total_updates: int, warmup: int):
    """LR multiplier per update: linear warmup over `warmup` updates, then config.lr_scheduler."""
    def f(update: int) -> float:
        if warmup and update < warmup:
            return (update + 1) / warmup
        if config.lr_scheduler == "constant":
            return 1.0
        progress = min(1.0, (update - warmup) / max(1, total_updates - warmup))
        if config.lr_scheduler == "linear":
            return 1.0 - progress
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return f


class Learner:
    """Models, optimizers and the update. policy_path / critic_path: where to load weights from (a
    checkpoint on resume); the frozen KL reference always comes from `reference_path`."""

    def __init__(self, config: TrainConfig, policy_path: str | Path, critic_path: Optional[str | Path] = None,
                 reference_path: Optional[str | Path] = None, device: str = "cpu"):
        from transformers import AutoTokenizer

        self.config, self.device = config, torch.device(device)
        self.rank, self.world_size = world()
        dtype = _DTYPES[config.dtype]
        self.tokenizer = AutoTokenizer.from_pretrained(policy_path)
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        policy = load_causal_lm(policy_path, dtype=dtype).to(self.device)
        if config.gradient_checkpointing:
            policy.gradient_checkpointing_enable()
        if config.lora:
            from peft import LoraConfig, get_peft_model

            policy = get_peft_model(policy, LoraConfig(
                r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                target_modules=list(config.lora_target_modules), task_type="CAUSAL_LM"))
        self.reference = None
        if config.kl_coef > 0:
            self.reference = load_causal_lm(reference_path or policy_path, dtype=dtype)
            self.reference.to(self.device).eval().requires_grad_(False)

        if config.minibatch_size % self.world_size:
            raise ValueError(f"minibatch_size ({config.minibatch_size}) must be a multiple of the number of "
                             f"ranks ({self.world_size})")
        self.micro = config.micro_batch_size
        self.n_minibatches = max(1, config.dialogues_per_step // config.minibatch_size)
        # One update per batch: the weights that sampled the batch are the ones being updated, so the PPO
        # ratio's denominator is the update's own log-prob, detached (ratio = 1, gradient A * grad log pi);
        # this saves a forward pass over the batch.
        self.on_policy = config.ppo_epochs == 1 and self.n_minibatches == 1
        total_updates = max(1, config.steps * config.ppo_epochs * self.n_minibatches)
        ds = None
        if config.zero_stage:
            ds = deepspeed_config(config.zero_stage, self.micro, self.world_size, config.max_grad_norm,
                                  config.dtype, config.deepspeed_config)
        self.policy = self._optimized(policy, config.actor_lr, total_updates, ds,
                                      config.warmup_updates(config.actor_warmup_ratio, total_updates))
        self.critic = None
        if config.algorithm == "ppo":
            critic = ValueModel(critic_path or config.critic_model or policy_path, dtype).to(self.device)
            if config.gradient_checkpointing:
                critic.backbone.gradient_checkpointing_enable()
            self.critic = self._optimized(critic, config.critic_lr, total_updates, ds and dict(ds),
                                          config.warmup_updates(config.critic_warmup_ratio, total_updates))

    def _optimized(self, module: nn.Module, lr: float, total_updates: int, ds: Optional[dict],
                   warmup: int) -> Optimized:
        params = [p for p in module.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=self.config.weight_decay)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(self.config, total_updates, warmup))
        return Optimized(module, opt, sched, self.config.max_grad_norm, ds)

    # ------------------------------------------------------------------------------------ forward passes
    def _logprobs(self, model: Any, ids: Tensor, attn: Tensor, action_mask: Tensor, with_entropy: bool = False):
        """[B, T-1] token log-probs under softmax(logits / T) (0 off the policy's tokens) and, when asked,
        the entropy (with a gradient only when the entropy bonus is on). Only the positions that predict a
        policy token go through the LM head, a chunk at a time and recomputed in the backward
        (trainer.learning.head_logprobs): no [B, T, V] logits are ever formed."""
        module = model.module if isinstance(model, Optimized) else model
        on = action_mask != 0
        if not bool(on.any()):  # a padding pass still runs the head, so every rank's backward has the same graph
            on = torch.zeros_like(on)
            on[0, 0] = True
        lp_on, ent_on = model_logprobs(model, module, ids, attn, on, self.config.temperature, with_entropy)
        lp = torch.zeros(ids.shape[0], ids.shape[1] - 1, device=ids.device)
        lp[on] = lp_on
        if not with_entropy:
            return lp, None
        if not (torch.is_grad_enabled() and self.config.entropy_coef > 0):
            ent_on = ent_on.detach()
        entropy = torch.zeros_like(lp)
        entropy[on] = ent_on
        return lp, entropy

    def _chunks(self, batch: Batch, index: Tensor) -> list[Tensor]:
        return micro_batches(batch, index, self.micro, self.config.max_tokens_per_micro_batch)

    def _rows(self, batch: Batch, idx: Tensor) -> tuple[Tensor, Optional[Tensor], int]:
        """(input ids, attention mask or None, width) of rows `idx`, cut to their longest row. Rows are right-padded
        (make_batch), so causal attention alone already keeps every real token from the padding after it:
        the mask is dropped and SDPA takes its fused path (on CPU too), which keeps no s x s scores nor a
        float copy of an s x s mask for the backward."""
        attn = batch.attention_mask[idx]
        width = max(2, int(attn.sum(dim=1).max()))
        ids, attn = batch.input_ids[idx, :width].to(self.device), attn[:, :width]
        right_padded = bool((attn[:, 1:] <= attn[:, :-1]).all())
        return ids, (None if right_padded else attn.to(self.device)), width

    @torch.no_grad()
    def _rollout_stats(self, batch: Batch) -> dict[str, Tensor]:
        """Old log-probs (and values, reference log-probs) of the batch as it was sampled."""
        parts: dict[str, list[Tensor]] = {"old_logprobs": [], "old_values": [], "ref_logprobs": []}
        order: list[Tensor] = []
        self.policy.module.eval()
        full = batch.action_mask.shape[1]
        for idx in self._chunks(batch, torch.arange(len(batch))):
            ids, attn, width = self._rows(batch, idx)
            mask = batch.action_mask[idx, :width - 1].to(self.device)
            pad = lambda t: nn.functional.pad(t.cpu(), (0, full - t.shape[1]))  # noqa: E731 (back to the batch's width)
            if not self.on_policy:  # on-policy: the old log-probs are the update's own, detached
                parts["old_logprobs"].append(pad(self._logprobs(self.policy, ids, attn, mask)[0]))
            if self.critic is not None:
                parts["old_values"].append(pad(self.critic(ids, attn)[:, :-1]))
            if self.reference is not None:
                parts["ref_logprobs"].append(pad(self._logprobs(self.reference, ids, attn, mask)[0]))
            order.append(idx)
        order_index = torch.argsort(torch.cat(order))  # the chunks may have put the rows in another order
        return {k: torch.cat(v)[order_index] for k, v in parts.items() if v}

    def advantages(self, batch: Batch, old_values: Optional[Tensor] = None) -> tuple[Tensor, Optional[Tensor]]:
        """[B, T-1] advantages (and returns for PPO) for the chosen algorithm."""
        c, mask = self.config, batch.action_mask
        if c.advantage != "dialogue":
            return self._turn_advantages(batch, old_values)
        rewards = batch.token_rewards
        if rewards is None:
            rewards = algorithms.last_token_rewards(batch.scores, mask)
        if c.algorithm == "ppo":
            adv, returns = algorithms.gae_advantages(rewards, old_values, mask, c.gamma, c.lam)
            if c.whiten_advantages:  # over the global batch (all ranks)
                adv = algorithms.masked_whiten(adv, mask, all_reduce=all_reduce_sum)
            return adv, returns
        if c.algorithm == "reinforce_pp":
            return algorithms.reinforce_pp_advantages(rewards, mask, c.gamma, all_reduce=all_reduce_sum), None
        # group baselines are over dialogues, not rows (a think-mode dialogue has one row per turn)
        first = {i: r for r, i in reversed(list(enumerate(batch.sample_index))) if i >= 0}
        dialogues = sorted(first)
        scores = batch.scores[[first[i] for i in dialogues]] if dialogues else batch.scores[:0]
        groups = [batch.group_ids[first[i]] for i in dialogues]
        if c.algorithm == "grpo":
            per_dialogue = algorithms.grpo_advantages(scores, groups, c.adv_eps)
        else:
            per_dialogue = algorithms.rloo_advantages(scores, groups)
        lookup = dict(zip(dialogues, per_dialogue.tolist()))
        seq = torch.tensor([lookup.get(i, 0.0) for i in batch.sample_index])
        return seq[:, None] * mask, None

    def _turn_advantages(self, batch: Batch, old_values: Optional[Tensor]) -> tuple[Tensor, Optional[Tensor]]:
        """turn_grpo | turn_gae (trainer.learning.algorithms): [N, K] per-turn advantages, each reply's tokens
        sharing its turn's; turn_gae also gives the critic its returns there (every token of the reply)."""
        c, t = self.config, turn_table(batch)
        if bool(batch.action_mask.any()) and not bool((batch.turn_index >= 0).any()):
            raise ValueError(f"advantage {c.advantage}: the batch's dialogues carry no turn spans")
        if c.advantage == "turn_grpo":
            per_turn = turn_advantages.turn_grpo_advantages(t.scores, t.changes, t.groups, c.turn_weight, c.adv_eps)
            return spread_turn_values(per_turn, t.dialogue, batch.turn_index), None
        values = values_at_turn_starts(old_values, t.dialogue, batch.turn_index, tuple(t.said.shape))
        adv, returns = turn_advantages.turn_gae_advantages(t.rewards, values, t.credited, c.turn_gamma, c.lam)
        adv = spread_turn_values(adv, t.dialogue, batch.turn_index)
        if c.whiten_advantages:  # over the global batch (all ranks), as the token-level GAE
            adv = algorithms.masked_whiten(adv, batch.action_mask, all_reduce=all_reduce_sum)
        return adv, spread_turn_values(returns, t.dialogue, batch.turn_index)

    # --------------------------------------------------------------------------------------------- update
    def update(self, batch: Batch, seed: int = 0, policy_version: Optional[int] = None) -> dict[str, float]:
        """One RL update on a batch of this rank's dialogues; returns metrics averaged over all ranks.
        `policy_version`: the learner's version (updates so far); tokens the batch says were sampled by an
        older one are stale and weighed by config.off_policy_estimator (trainer.learning.algorithms)."""
        c = self.config
        stats = self._rollout_stats(batch)
        if policy_version is not None and batch.versions is not None:
            stats["stale"] = ((batch.versions >= 0) & (batch.versions < policy_version)).to(torch.float32)
        adv, returns = self.advantages(batch, stats.get("old_values"))
        mask = batch.action_mask
        totals: dict[str, float] = {}
        n_updates = 0
        self.policy.module.train()
        if self.critic is not None:
            self.critic.module.train()
        gen = torch.Generator().manual_seed(seed)
        for _ in range(c.ppo_epochs):
            order = torch.randperm(len(batch), generator=gen) if c.ppo_epochs > 1 else torch.arange(len(batch))
            for mb in torch.tensor_split(order, self.n_minibatches):
                denom = all_reduce_sum(mask[mb].sum().double()).clamp(min=1).to(self.device)
                chunks = self._chunks(batch, mb)
                # every rank runs the same number of micro-batches (collectives happen in backward)
                n_micro = all_reduce_max(len(chunks))
                sums = torch.zeros(len(MICRO_SUMS), dtype=torch.float64)
                for k in range(n_micro):
                    idx, weight = (chunks[k], 1.0) if k < len(chunks) else (order[:1], 0.0)
                    sums += self._micro_step(batch, idx, stats, adv, returns, denom, weight, k == n_micro - 1)
                sums = all_reduce_sum(sums)
                grad_norm = self.policy.step()
                critic_norm = self.critic.step() if self.critic is not None else 0.0
                for name, v in zip(MICRO_SUMS, sums.tolist()):
                    totals[name] = totals.get(name, 0.0) + v
                totals[GRAD_NORM] = totals.get(GRAD_NORM, 0.0) + grad_norm
                totals[CRITIC_GRAD_NORM] = totals.get(CRITIC_GRAD_NORM, 0.0) + critic_norm
                n_updates += 1
        mismatch, known = totals.pop(_MISMATCH), totals.pop(_KNOWN)
        stale, weight, capped, tokens = (totals.pop(k) for k in (_STALE, _WEIGHT, _CAPPED, _TOKENS))
        metrics = {k: v / max(1, n_updates) for k, v in totals.items()}
        if stale > 0:
            metrics.update({STALE_TOKEN_SHARE: stale / max(tokens, 1.0), BEHAVIOUR_WEIGHT_MEAN: weight / stale,
                            BEHAVIOUR_WEIGHT_CAPPED: capped / stale})
        if known > 0:
            metrics[LOGPROB_MISMATCH] = mismatch / known
        if self.critic is None:
            metrics.pop(VALUE_LOSS), metrics.pop(CRITIC_GRAD_NORM)
        if self.reference is None:
            metrics.pop(KL_REF)
        m = mask.to(torch.float64)
        sums = all_reduce_sum(torch.stack([(adv.double() * m).sum(), m.sum()]))
        metrics[ADVANTAGE_MEAN] = float(sums[0] / sums[1].clamp(min=1))
        metrics[ACTOR_LR] = self.policy.lr()
        metrics[UPDATES] = float(n_updates)
        self.policy.module.eval()
        return metrics

    def _micro_step(self, batch: Batch, idx: Tensor, stats: dict[str, Tensor], adv: Tensor,
                    returns: Optional[Tensor], denom: Tensor, weight: float, boundary: bool) -> Tensor:
        """Forward/backward of one micro-batch (weight 0: a padding pass that keeps ranks in step)."""
        c, dev = self.config, self.device
        ids, attn, width = self._rows(batch, idx)
        cut = lambda t: t[idx, :width - 1].to(dev)  # noqa: E731 (per-token tensors, cut as the rows are)
        mask = cut(batch.action_mask) * weight
        logprobs, entropy = self._logprobs(self.policy, ids, attn, mask, with_entropy=True)
        old = logprobs.detach() if self.on_policy else cut(stats["old_logprobs"])
        sampled = cut(batch.sampled_logprobs)
        stale = cut(stats["stale"]) if "stale" in stats else None
        off = {_STALE: torch.zeros(()), _WEIGHT: torch.zeros(()), _CAPPED: torch.zeros(())}
        if stale is not None and bool((stale * mask).any()):  # overlapped training: weigh the stale tokens
            pg_loss, clip_frac, approx_kl, parts = algorithms.decoupled_policy_loss(
                logprobs, old, sampled, stale, cut(adv), mask, c.clip_eps, c.behaviour_weight_cap,
                c.off_policy_estimator, denom)
            off = {_STALE: parts["stale"], _WEIGHT: parts["weight"], _CAPPED: parts["capped"]}
        else:
            pg_loss, clip_frac, approx_kl = algorithms.ppo_policy_loss(logprobs, old, cut(adv), mask,
                                                                       c.clip_eps, denom)
        known = mask * (sampled != 0)
        mismatch = ((old - sampled).abs() * known).sum()
        entropy_mean = algorithms.masked_sum_mean(entropy, mask, denom)
        loss = pg_loss - c.entropy_coef * entropy_mean
        kl_ref = torch.zeros((), device=dev)
        if self.reference is not None:
            kl_ref = algorithms.masked_sum_mean(algorithms.kl_penalty(logprobs, cut(stats["ref_logprobs"]),
                                                                      c.kl_estimator), mask, denom)
            loss = loss + c.kl_coef * kl_ref
        self.policy.backward(loss, boundary)
        v_loss = torch.zeros((), device=dev)
        if self.critic is not None:
            values = self.critic(ids, attn)[:, :-1]
            v_loss, _ = algorithms.value_loss(values, cut(stats["old_values"]), cut(returns), mask,
                                              c.value_clip_eps, denom)
            self.critic.backward(v_loss, boundary)
        sums = {POLICY_LOSS: pg_loss, CLIP_FRAC: clip_frac, APPROX_KL: approx_kl, ENTROPY: entropy_mean,
                KL_REF: kl_ref, VALUE_LOSS: v_loss, _MISMATCH: mismatch, _KNOWN: known.sum(), **off,
                _TOKENS: mask.sum()}
        return torch.tensor([sums[name].item() for name in MICRO_SUMS], dtype=torch.float64)

    # -------------------------------------------------------------------------------------------- weights
    def generation_model(self) -> nn.Module:
        """The policy module to sample from (shares weights with training)."""
        return self.policy.module

    def merged_policy(self) -> nn.Module:
        """A plain transformers model with the current weights (LoRA merged into a copy)."""
        model = self.policy.module
        if self.config.lora:
            return copy.deepcopy(model).merge_and_unload()
        return model

    def stream_policy_weights(self, bucket_bytes: int) -> Iterator[list[tuple[str, Tensor]]]:
        """The full current policy weights (LoRA merged, ZeRO-3 partitions gathered), e.g. for a vLLM engine,
        in buckets of whole layers, without a merged or gathered copy of the model (trainer.policies.weight_stream)."""
        from trainer.policies.weight_stream import stream_weights

        return stream_weights(self.policy.module, bucket_bytes, lora=bool(self.config.lora),
                              zero3=self.config.zero_stage == 3)
