"""KV transfer from a prefill pool to a decode pool (disaggregated serving).

The prompt's KV (all ``ISL`` tokens, every layer) moves from the prefill ranks that computed it to the
decode ranks that hold it: each rank sends or receives its own shard over its own NIC in parallel, so
the slowest rank's bytes, ``max(send, receive)``, set the time (a decode rank with replicated KV heads,
``tp > kv heads``, receives its replicas; MLA moves its latent; sliding-window layers their window):

    whole      t = latency + bytes_rank / (bw · efficiency)
    per-layer  t = latency + max(bytes_rank / L, bytes_rank - bw_eff · prefill · (L - 1) / L) / bw_eff

``whole``: the transfer starts when the prefill has finished (vLLM's NixlConnector: the decode instance
reads a finished request's blocks; its ``save_kv_layer`` and ``wait_for_layer_load`` hooks do nothing,
``vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py``). ``per-layer``: each layer's KV
streams as soon as the layer is computed, so only the last layer's share is exposed, unless the link
is slower than the prefill produces KV (``L`` layers finishing evenly over the prefill time).

The link: the intra-node link when both pools fit in one node, else the slower (effective bandwidth,
latency) of the two devices' inter-node links (``DeviceSpec.links``, after ``--fabric`` /
``--inter-node-bandwidth`` / ``--inter-node-latency``: :mod:`simcast.core.fabrics`).
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.device import LinkSpec
from simcast.core.kv import kv_dtype_bytes
from simcast.core.memory import stage_kv_bytes_for
from simcast.core.shards import sharded_dims
from simcast.engines.partition import build_pipeline_stage_plan
from simcast.serving.config import ServingConfig

KV_TRANSFER_MODES = ("whole", "per-layer")
"""``--kv-transfer``: the whole prompt's KV after the prefill, or streamed layer by layer during it."""


@dataclass(frozen=True, kw_only=True)
class KvTransfer:
    mode: str
    bytes_per_request: int  # the prompt's KV as the decode replica holds it, all its ranks
    bytes_per_rank: int  # the slowest rank's share (max of send and receive)
    link: str
    whole_s: float  # latency + bytes_per_rank / effective bandwidth
    data_s: float  # bytes_per_rank / effective bandwidth: how long it holds the busiest rank's link (NIC queue)
    exposed_s: float  # what TTFT sees after the prefill (mode)
    note: str


def rank_kv_bytes(cfg: ServingConfig, tokens: int) -> tuple[int, int]:
    """(the largest per-rank KV of ``tokens`` tokens over the stages, the whole replica's KV) for one request."""
    m, par = cfg.model, cfg.parallel
    sd = sharded_dims(m, par.tp)
    plan = build_pipeline_stage_plan(m.num_layers, par.pp, cfg.partition, m.tie_word_embeddings)
    kvb = kv_dtype_bytes(m, cfg.kv_cache_dtype)
    per = [stage_kv_bytes_for(m, sd, i, 1, tokens, kvb) for i in plan.stage_infos]
    return max(per), sum(per) * par.tp


def transfer_link(prefill: ServingConfig, decode: ServingConfig, devices: int) -> tuple[LinkSpec, str]:
    """The link a request's KV crosses and why (module docstring)."""
    lp, ld = prefill.device.links, decode.device.links
    if prefill.device.name == decode.device.name and devices <= ld.devices_per_node:
        return ld.intra_node, f"both pools in one node of {ld.devices_per_node}: intra-node link"
    a, b = lp.inter_node, ld.inter_node
    slow = a if a.effective_bw_bytes_per_s < b.effective_bw_bytes_per_s else b
    lat = max(a.latency_s, b.latency_s)
    link = LinkSpec(name=slow.name, bw_bytes_per_s=slow.bw_bytes_per_s, latency_s=lat, efficiency=slow.efficiency)
    return link, "pools on separate nodes: the slower of the two inter-node links"


def kv_transfer(
    prefill: ServingConfig, decode: ServingConfig, mode: str, prefill_s: float, *, together: int
) -> KvTransfer:
    """One request's KV transfer (module docstring); ``together``: devices of both pools."""
    isl = decode.workload.input_length
    send, _ = rank_kv_bytes(prefill, isl)
    recv, total = rank_kv_bytes(decode, isl)
    rank = max(send, recv)
    link, why = transfer_link(prefill, decode, together)
    bw = link.effective_bw_bytes_per_s
    data = rank / bw
    whole = link.latency_s + data
    layers = decode.model.num_layers
    if mode == "per-layer":
        exposed = link.latency_s + max(data / layers, data - prefill_s * (layers - 1) / layers)
        how = (
            f"per-layer: streamed as each of {layers} layers finishes, exposed latency + "
            "max(bytes/L, bytes - bw*prefill*(L-1)/L)/bw"
        )
    else:
        exposed = whole
        how = "whole: after the prefill finishes (vLLM NixlConnector reads a finished request's blocks)"
    note = (
        f"KV transfer ({how}): {total / 2**20:.1f} MiB per request, {rank / 2**20:.2f} MiB on the busiest rank "
        f"over {link.name} ({link.bw_bytes_per_s / 1e9:g} GB/s x {link.efficiency:.3g}, {link.latency_s * 1e6:.3g} us; "
        f"{why}): {whole * 1e3:.3f} ms, {exposed * 1e3:.3f} ms exposed"
    )
    return KvTransfer(
        mode=mode,
        bytes_per_request=total,
        bytes_per_rank=rank,
        link=link.name,
        whole_s=whole,
        data_s=data,
        exposed_s=exposed,
        note=note,
    )
