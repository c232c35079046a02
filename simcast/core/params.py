"""Parameter counts, unsharded: per layer, total (all experts) and active per token.

Counts are elements. A routed-expert layer holds ``num_experts`` experts, of which a
token uses ``top_k`` (plus all shared experts); attention, norms and the router are
used by every token. ``active`` counts what a token multiplies, so the forward FLOPs
per token are ``2 · active`` plus attention's score/value terms; the embedding table
is a gather (no FLOPs) and is left out unless ``include_embedding`` (publishers
differ: Mistral's 12.9B for Mixtral counts it, DeepSeek's 37B and OpenAI's 5.1B do not).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.model_spec import ModelSpec


@dataclass(frozen=True, kw_only=True)
class LayerParams:
    """One decoder layer's parameters by part (elements)."""

    attention: int  # projections, biases, q/k norms or MLA norms, attention sinks
    norms: int  # input and post-attention RMSNorm weights
    dense_mlp: int  # gate, up, down of a dense layer (0 in an MoE layer)
    router: int  # router weight (+ bias)
    expert: int  # one routed expert: gate, up, down (+ biases)
    num_experts: int
    top_k: int
    shared: int  # all shared experts together

    @property
    def total(self) -> int:
        return self.attention + self.norms + self.dense_mlp + self.router + self.expert * self.num_experts + self.shared

    @property
    def active(self) -> int:
        return self.attention + self.norms + self.dense_mlp + self.router + self.expert * self.top_k + self.shared


def attention_params(model: ModelSpec) -> int:
    """Attention parameters of one layer: GQA (q/k/v/o, biases, q/k-norm, sinks, output gate) or MLA
    (a linear-attention layer: :meth:`~simcast.core.linear_attention.LinearAttentionSpec.params`)."""
    h, hq = model.hidden_size, model.num_heads
    if model.mla is not None:
        a = model.mla
        q = (
            (h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * hq * a.qk_head_dim)
            if a.q_lora_rank
            else h * hq * a.qk_head_dim
        )
        kv = (
            h * (a.kv_lora_rank + a.qk_rope_head_dim)
            + a.kv_lora_rank
            + a.kv_lora_rank * hq * (a.qk_nope_head_dim + a.v_head_dim)
        )
        return q + kv + hq * a.v_head_dim * h
    d, hkv = model.head_dim, model.num_kv_heads
    qkv = (hq + 2 * hkv) * d
    return (
        h * qkv
        + hq * d * h
        + (qkv if model.attention_bias else 0)
        + (h if model.o_proj_bias else 0)
        + (2 * d if model.qk_norm else 0)
        + (hq if model.attention_sinks else 0)
        + (h * hq * d if model.attn_output_gate else 0)  # q_proj's gate half
    )


def layer_params(model: ModelSpec, layer: int) -> LayerParams:
    """Parameters of decoder layer ``layer`` (dense or MoE by the config)."""
    h = model.hidden_size
    attn = model.linear.params(h) if model.linear is not None and model.is_linear(layer) else attention_params(model)
    common = dict(attention=attn, norms=2 * h)
    moe = model.moe
    if moe is None or not moe.is_moe_layer(layer):
        return LayerParams(
            **common, dense_mlp=3 * h * model.intermediate_size, router=0, expert=0, num_experts=0, top_k=0, shared=0
        )
    ie = moe.expert_intermediate
    expert = 3 * h * ie + ((2 * ie + h) if moe.expert_bias else 0)
    return LayerParams(
        **common,
        dense_mlp=0,
        router=h * moe.num_experts + (moe.num_experts if moe.router_bias else 0),
        expert=expert,
        num_experts=moe.num_experts,
        top_k=moe.top_k,
        shared=moe.num_shared_experts * 3 * h * moe.shared_intermediate,
    )


def _edges(model: ModelSpec) -> tuple[int, int]:
    """(embedding table, lm_head + final norm) elements."""
    emb = model.vocab_size * model.hidden_size
    return emb, (0 if model.tie_word_embeddings else emb) + model.hidden_size


def mtp_params(model: ModelSpec) -> int:
    """DeepSeek's multi-token-prediction modules as the checkpoint holds them: per module one
    decoder layer, two input norms, the 2h -> h projection, the head norm, and its own copies
    of the embedding and the output head."""
    if not model.num_mtp_layers:
        return 0
    h = model.hidden_size
    emb, _ = _edges(model)
    per = layer_params(model, model.num_layers).total + 3 * h + 2 * h * h + 2 * emb
    return model.num_mtp_layers * per


def total_params(model: ModelSpec, include_mtp: bool = False) -> int:
    """All parameters (every expert, a multimodal checkpoint's vision encoder), embedding counted once when tied."""
    emb, head = _edges(model)
    body = sum(layer_params(model, i).total for i in range(model.num_layers))
    return emb + head + body + model.encoder_params + (mtp_params(model) if include_mtp else 0)


def active_params(model: ModelSpec, include_embedding: bool = False) -> int:
    """Parameters one token multiplies: top-k + shared experts, attention, router, lm_head."""
    emb, head = _edges(model)
    body = sum(layer_params(model, i).active for i in range(model.num_layers))
    return body + head + (emb if include_embedding else 0)
