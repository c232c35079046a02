"""Physical bounds a DeepSeek-R1 serving prediction must respect (used by ``deepseek_r1_matrix.py``).

Three bounds, each a strict limit under stated assumptions (a prediction past one is flagged implausible):

* **TPOT floor** (ms): every decode step reads, on each GPU of the decode engine, its share of the weights every
  token multiplies whatever the batch: attention, dense MLPs, shared experts and routers of every layer
  (``simcast.core.params.layer_params``; the embedding and the LM head left out), split over the attention-TP
  ranks only (attention DP replicates them), plus the routed experts one token needs (top-k per MoE layer; a
  batch needs at least these), spread over all the engine's GPUs at best; at the device's HBM bandwidth; a
  step yields at most k + 1 tokens per request with k MTP drafts:
  ``floor = bytes_per_gpu / HBM_bw / (k + 1)``.
* **HBM bound** (output token/s per GPU): each decode step reads the KV cache of every running request's
  context; with MLA the latent cache (kv_lora_rank + rope dim per token and layer) is whole on every
  attention-TP rank. Per GPU: ``HBM_bw x (k + 1) / (kv_bytes_per_token x mean_context x tp_attn)`` with mean
  context = mean input + mean output / 2 and the KV at fp8 whatever the run's (the weights' reads, which only
  lower it, left out). Over all GPUs of a disaggregated deployment the bound is scaled by the decode share.
* **Compute bound** (output token/s per GPU): every prompt and output token costs at least 2 x the active
  parameters in FLOPs (attention's score FLOPs, drafts and everything else left out) at the device's highest
  dense matmul peak over its formats: ``peak x GPUs / (2 N_active (in + out tokens) / out tokens)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simcast.core.kv import kv_dtype_bytes
from simcast.core.params import active_params, layer_params
from simcast.inputs.loaders import load_device, load_model, with_quantization


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """The three bounds of one row (ms, token/s per GPU)."""

    tpot_floor_ms: float
    hbm_tok_s_gpu: float
    compute_tok_s_gpu: float

    def violations(self, *, tpot_ms: float, tok_s_gpu: float) -> list[str]:
        """What a prediction breaks (empty: nothing)."""
        out = []
        if tpot_ms < self.tpot_floor_ms:
            out.append(f"TPOT {tpot_ms:.2f} ms below the weight-read floor {self.tpot_floor_ms:.2f} ms")
        if tok_s_gpu > self.hbm_tok_s_gpu:
            out.append(f"{tok_s_gpu:.0f} tok/s/GPU above the HBM (KV read) bound {self.hbm_tok_s_gpu:.0f}")
        if tok_s_gpu > self.compute_tok_s_gpu:
            out.append(f"{tok_s_gpu:.0f} tok/s/GPU above the compute bound {self.compute_tok_s_gpu:.0f}")
        return out


def _always_read_bytes(model: Any) -> float:
    """Bytes of the weights every decode step reads whatever the batch (see the module docstring)."""
    q = model.quant
    per = q.dense_bytes if q is not None else float(model.dtype_bytes)
    n = 0
    for i in range(model.num_layers):
        lp = layer_params(model, i)
        n += lp.attention + lp.dense_mlp + lp.shared + lp.router
    return n * per


def _top_k_expert_bytes(model: Any) -> float:
    """Bytes of the routed experts one token multiplies (top-k per MoE layer)."""
    q = model.quant
    per = q.expert_bytes if q is not None else float(model.dtype_bytes)
    return sum(layer_params(model, i).expert * layer_params(model, i).top_k for i in range(model.num_layers)) * per


def _kv_bytes_per_token(model: Any, kv_dtype: str) -> float:
    """KV bytes of one context token over all layers (MLA: the latent + rope key)."""
    mla = model.mla
    per_layer = mla.kv_lora_rank + mla.qk_rope_head_dim if mla is not None else 2 * model.num_kv_heads * model.head_dim
    return per_layer * model.num_layers * kv_dtype_bytes(model, kv_dtype)


def bounds_for(row: Any, result: dict) -> Bounds:
    """The bounds of a matrix row given its bench-serve result JSON (token totals, for the means)."""
    model = load_model(row.model)
    dev = load_device(row.device)
    k = row.mtp
    dl = row.decode_layout()
    tp_attn = 1 if dl.get("dp_attention") == "true" else int(dl.get("tp", 1))
    hbm = dev.hbm_bw_bytes_per_s
    world = int(dl.get("tp", 1)) * int(dl.get("dp", 1)) * int(dl.get("pp", 1))
    per_gpu = _always_read_bytes(model) / tp_attn + _top_k_expert_bytes(model) / world
    floor_ms = per_gpu / hbm / (k + 1) * 1e3
    n = max(1, result["completed"])
    mean_in, mean_out = result["total_input_tokens"] / n, result["total_output_tokens"] / n
    kv_dtype = "fp8"  # the smallest KV element simcast offers (auto|bf16|fp8), so the bound holds for any
    ctx = mean_in + mean_out / 2
    gpus = row.gpus()
    decode_gpus = gpus
    if row.disagg:
        w = 1
        for key in ("tp", "dp", "pp"):
            w *= int(dl.get(key, 1))
        decode_gpus = row.workers[1] * w
    hbm_bound = hbm * (k + 1) / (_kv_bytes_per_token(model, kv_dtype) * ctx * tp_attn) * decode_gpus / gpus
    peak = max(dev.matmul_flops_per_s.values())
    per_out = 2 * active_params(with_quantization(model, None)) * (mean_in + mean_out) / mean_out
    return Bounds(tpot_floor_ms=floor_ms, hbm_tok_s_gpu=hbm_bound, compute_tok_s_gpu=peak / per_out)
