"""DeepEP dispatch / combine time as the engines run it (``deepseek-ai/DeepEP`` V1 kernels).

Sources (all ``deepseek-ai/DeepEP`` @ ``dd758caf``): the V1 performance tables in ``docs/legacy.md`` (the
README's tables before EPv2; H800, ~160 GB/s NVLink, one CX7 400 Gb/s NIC per GPU), and how those tables
count their bytes: ``tests/legacy/test_intranode.py``, ``test_internode.py``, ``test_low_latency.py``.

**Normal mode** (prefill: SGLang ``--deepep-mode normal``/``auto`` on extend batches, vLLM
``deepep_high_throughput``). Each rank sends its ``T`` tokens once per *destination node* over RDMA
(per-node deduplication: a token routed to several experts of one node crosses the fabric once, to the
same-index GPU there), which forwards it over NVLink to each destination rank of its node::

    RDMA bytes  = T · N · (m - 1)/m · b        N = expected distinct nodes among a token's experts
    NVLink bytes = T · R · b                   R = expected distinct ranks (the test's ``recv_x`` bytes)
    t = α + max(RDMA bytes / (f_rdma · B_inter), NVLink bytes / (f_nvl · B_intra))

(``m`` nodes of ``g`` ranks, ``ep = g·m``; the RDMA sender and the NVLink forwarder run concurrently, so the
slower bounds the kernel). Inside one node only the NVLink term is left. ``b`` is DeepEP's payload per
token: FP8 dispatch ``h·(1 + 4/128)`` (one fp32 scale per 128 elements), BF16 combine ``2h``.

**Low-latency mode** (decode): one message per (token, selected expert), no deduplication; ``(ep-g)/ep``
of them to other nodes over RDMA, the rest over NVLink (DeepEP PR #173, "low-latency kernels now leverage
NVLink")::

    t = α + max(T·k·(ep-g)/ep·b / (f_rdma · B_inter), T·k·g/ep·b / (f_nvl · B_intra))

with ``b = h + h/128·4 + 16`` (FP8 dispatch, as ``test_low_latency.py`` counts it) or ``2h`` (BF16 combine).

``α`` and the achieved fractions ``f`` are DeepEP's, fitted on its own tables (:data:`LL_DISPATCH`, ...)
against the H800 links of the test (:data:`REF_INTRA_BW`, :data:`REF_INTER_BW`); the link rates ``B`` are
the device profile's (its link table), so another fabric scales the bandwidth terms. Assumptions: the
kernels' fixed cost ``α`` does not depend on the fabric; the normal kernels' ``α`` is the low-latency
dispatch's (DeepEP publishes none for them); routing statistics below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

REF_INTRA_BW = 200e9
"""H800 NVLink per direction, bytes/s (400 GB/s bidirectional; ``simcast/data/device_profiles/h800.yaml``)."""
REF_INTER_BW = 50e9
"""CX7 400 Gb/s per GPU per direction, bytes/s (DeepEP ``docs/legacy.md``: "~50 GB/s maximum bandwidth")."""
HIDDEN_REF = 7168
"""Hidden size of DeepEP's published runs (DeepSeek-V3)."""


def fp8_token_bytes(hidden: int) -> float:
    """Normal-mode FP8 payload of one token: ``h`` bytes plus one fp32 scale per 128 (``fp8_factor`` of
    ``test_internode.py``: ``(1 + 4/128)/2`` of the BF16 bytes)."""
    return hidden * (1 + 4 / 128)


def ll_fp8_token_bytes(hidden: int) -> float:
    """Low-latency FP8 message: ``h + h/128·4 + 16`` bytes (``num_fp8_bytes`` of ``test_low_latency.py``)."""
    return hidden + hidden / 128 * 4 + 16


def bf16_token_bytes(hidden: int) -> float:
    """BF16 combine payload of one token, bytes."""
    return 2.0 * hidden


@dataclass(frozen=True, kw_only=True)
class DeepEPFit:
    """One DeepEP kernel's constants: fixed cost ``latency_s`` and achieved fractions of the link rates."""

    latency_s: float
    rdma_fraction: float
    nvlink_fraction: float


def _ll_fit(t8_s: float, t16_s: float, t256_s: float, msg_bytes: float) -> DeepEPFit:
    """Closed-form fit on the EP8, EP16 and EP256 rows of the low-latency table (128 tokens, top-8): the
    EP16 -> EP256 slope gives the RDMA rate, its intercept ``α``, and EP8 (all NVLink) the NVLink rate.
    The EP32/64/128 rows are left out of the fit (``tests/cost/test_deepep.py`` checks them)."""
    sent = 128 * 8 * msg_bytes
    r16, r256 = sent * 8 / 16, sent * 248 / 256
    rdma = (r256 - r16) / (t256_s - t16_s)
    alpha = t16_s - r16 / rdma
    return DeepEPFit(
        latency_s=alpha, rdma_fraction=rdma / REF_INTER_BW, nvlink_fraction=sent / (t8_s - alpha) / REF_INTRA_BW
    )


LL_DISPATCH = _ll_fit(77e-6, 118e-6, 194e-6, ll_fp8_token_bytes(HIDDEN_REF))
"""Low-latency dispatch (``docs/legacy.md`` @ dd758caf: 77 / 118 / 194 us at EP8 / 16 / 256)."""
LL_COMBINE = _ll_fit(114e-6, 195e-6, 360e-6, bf16_token_bytes(HIDDEN_REF))
"""Low-latency combine (``docs/legacy.md`` @ dd758caf: 114 / 195 / 360 us at EP8 / 16 / 256)."""
NORMAL_LATENCY_S = LL_DISPATCH.latency_s
"""Normal kernels' fixed cost: assumed the low-latency dispatch's (not published)."""


def _normal_fit(intra_gbps: float, inter32_gbps: float, token_bytes: float) -> DeepEPFit:
    """Fit on the normal table's EP8 (intranode, NVLink) and EP32 (4 nodes, RDMA) rows, 4096 tokens.

    EP8: ``test_intranode.py`` routes uniformly (top-8 of 256), its NVLink bandwidth is ``recv_x`` bytes
    ``T·R·b`` over the time. EP32: ``test_internode.py`` picks ``min(nodes, 4)`` node groups and every picked
    node holds one of the top-8 (a picked group's best expert beats every unpicked one), so a token reaches
    all 4 nodes; its "RDMA bandwidth" counts ``T·4·b`` (own node included), the fabric carries ``T·3·b``."""
    t = 4096
    r8 = distinct_ranks(256, 8, 8)
    t8 = t * r8 * token_bytes / (intra_gbps * 1e9)
    t32 = t * 4 * token_bytes / (inter32_gbps * 1e9)
    return DeepEPFit(
        latency_s=NORMAL_LATENCY_S,
        rdma_fraction=t * 3 * token_bytes / (t32 - NORMAL_LATENCY_S) / REF_INTER_BW,
        nvlink_fraction=t * r8 * token_bytes / (t8 - NORMAL_LATENCY_S) / REF_INTRA_BW,
    )


def distinct_ranks(num_experts: int, top_k: int, ranks: int, selectable: int | None = None) -> float:
    """Expected distinct ranks among a token's ``top_k`` experts, experts split evenly over ``ranks``, the
    ``top_k`` drawn uniformly without replacement from ``selectable`` experts (None: all) that fill whole
    ranks (node-limited routing: the picked groups' experts)."""
    if ranks <= 1:
        return 1.0
    per = num_experts / ranks
    s = num_experts if selectable is None else selectable
    if per < 1 or s < top_k:
        return float(min(top_k, ranks))
    miss = math.comb(int(s - per), top_k) / math.comb(int(s), top_k)
    return (s / per) * (1 - miss)


def nodes_per_token(
    num_experts: int, top_k: int, nodes: int, expert_groups: int = 1, topk_groups: int = 1
) -> tuple[float, bool]:
    """``(N, grouped)``: expected distinct nodes among a token's ``top_k`` experts, and whether the
    model's node-limited routing was used (False: uniform routing, the fallback).

    Uniform (no groups, or groups that do not tile the nodes): ``m·(1 - C(E - E/m, k)/C(E, k))``.
    Grouped (DeepSeek ``n_group`` = ``expert_groups``, ``topk_group`` = ``topk_groups``): the picked groups
    are a uniform ``topk_groups``-subset and each picked group holds at least one of the ``top_k`` (the
    group score is built from its best experts, so its best is nearly always among the top-k: assumed
    always); with ``c`` whole groups per node a node is reached unless none of its groups is picked,
    ``1 - C(G - c, tg)/C(G, tg)``; a group spanning ``s`` nodes reaches this node through its guaranteed
    expert (``1/s``) or one of the other ``k - tg`` experts, drawn uniformly from the picked groups.
    """
    if nodes <= 1:
        return 1.0, False
    e, k, g, tg = num_experts, top_k, expert_groups, topk_groups
    tiles = g > 1 and tg <= g and e % g == 0 and k >= tg and (g % nodes == 0 or nodes % g == 0)
    if not tiles:
        return nodes * (1 - math.comb(e - e // nodes, k) / math.comb(e, k)), False
    if g >= nodes:
        c = g // nodes
        return nodes * (1 - math.comb(g - c, tg) / math.comb(g, tg)), True
    span, per_node, picked = nodes // g, e // nodes, tg * (e // g)
    rest = k - tg
    miss_rest = math.comb(picked - tg - per_node, rest) / math.comb(picked - tg, rest) if rest > 0 else 1.0
    hit = (tg / g) * (1 - (1 - 1 / span) * miss_rest)
    return nodes * hit, True


@dataclass(frozen=True, kw_only=True)
class Traffic:
    """Bytes one rank moves in one dispatch (or combine) and what the time rests on."""

    rdma_bytes: float  # over the fabric, to other nodes
    nvlink_bytes: float  # inside the node (received / forwarded)
    nodes_per_token: float  # expected distinct nodes per token (normal mode; 0 in low-latency mode)
    grouped: bool  # node-limited routing used (False: uniform)


def normal_traffic(
    tokens: float,
    hidden: int,
    token_bytes: float,
    *,
    num_experts: int,
    top_k: int,
    ep: int,
    ranks_per_node: int,
    expert_groups: int = 1,
    topk_groups: int = 1,
) -> Traffic:
    """Normal-mode bytes of one rank (module docstring): per-node dedup over RDMA, per-rank over NVLink."""
    g = max(1, min(ranks_per_node, ep))
    m = max(1, ep // g)
    n, grouped = nodes_per_token(num_experts, top_k, m, expert_groups, topk_groups)
    picked = num_experts * topk_groups // expert_groups if grouped and expert_groups >= m else None
    r = distinct_ranks(num_experts, top_k, ep, picked)
    return Traffic(
        rdma_bytes=tokens * n * (m - 1) / m * token_bytes,
        nvlink_bytes=tokens * r * token_bytes,
        nodes_per_token=n,
        grouped=grouped,
    )


def transfer_s(fit: DeepEPFit, traffic: Traffic, intra_bw: float, inter_bw: float) -> float:
    """``α + max(RDMA / (f_rdma·B_inter), NVLink / (f_nvl·B_intra))``, seconds (bandwidths in bytes/s)."""
    rdma = traffic.rdma_bytes / (fit.rdma_fraction * inter_bw) if traffic.rdma_bytes > 0 else 0.0
    nvl = traffic.nvlink_bytes / (fit.nvlink_fraction * intra_bw) if traffic.nvlink_bytes > 0 else 0.0
    return fit.latency_s + max(rdma, nvl)


def low_latency_traffic(tokens: float, top_k: int, msg_bytes: float, *, ep: int, ranks_per_node: int) -> Traffic:
    """Low-latency bytes of one rank: ``T·k`` messages, ``(ep - g)/ep`` of them over RDMA."""
    g = max(1, min(ranks_per_node, ep))
    total = tokens * top_k * msg_bytes
    return Traffic(rdma_bytes=total * (ep - g) / ep, nvlink_bytes=total * g / ep, nodes_per_token=0.0, grouped=False)


NORMAL_DISPATCH = _normal_fit(153, 58, fp8_token_bytes(HIDDEN_REF))
"""Normal dispatch (FP8): ``docs/legacy.md`` @ dd758caf, 153 GB/s NVLink at EP8, 58 GB/s RDMA at EP32."""
NORMAL_COMBINE = _normal_fit(158, 57, bf16_token_bytes(HIDDEN_REF))
"""Normal combine (BF16): ``docs/legacy.md`` @ dd758caf, 158 GB/s NVLink at EP8, 57 GB/s RDMA at EP32."""

FITS: dict[tuple[str, str], DeepEPFit] = {
    ("normal", "dispatch"): NORMAL_DISPATCH,
    ("normal", "combine"): NORMAL_COMBINE,
    ("low_latency", "dispatch"): LL_DISPATCH,
    ("low_latency", "combine"): LL_COMBINE,
}
"""DeepEP's constants by (mode, phase)."""


@dataclass(frozen=True, kw_only=True)
class DeepEPCall:
    """One dispatch or combine as an engine issues it: ``tokens`` on this rank (after the attention-TP
    split), ``hidden`` size, the routing, the EP group's shape and the links' rates (bytes/s per GPU per
    direction: the device profile's link table)."""

    mode: str  # normal | low_latency
    phase: str  # dispatch | combine
    tokens: float
    hidden: int
    top_k: int
    num_experts: int
    ep: int
    ranks_per_node: int
    intra_bw_bytes_per_s: float
    inter_bw_bytes_per_s: float
    fp8_dispatch: bool = True
    act_bytes: float = 2.0  # activation element bytes of a non-FP8 dispatch
    expert_groups: int = 1
    topk_groups: int = 1


def token_bytes(call: DeepEPCall) -> float:
    """Payload per token (normal) or per message (low latency), bytes."""
    if call.phase == "combine":
        return bf16_token_bytes(call.hidden)
    if not call.fp8_dispatch:
        return call.act_bytes * call.hidden
    return ll_fp8_token_bytes(call.hidden) if call.mode == "low_latency" else fp8_token_bytes(call.hidden)


def traffic_of(call: DeepEPCall) -> Traffic:
    """The bytes ``call`` moves on each link."""
    b = token_bytes(call)
    if call.mode == "low_latency":
        return low_latency_traffic(call.tokens, call.top_k, b, ep=call.ep, ranks_per_node=call.ranks_per_node)
    return normal_traffic(
        call.tokens,
        call.hidden,
        b,
        num_experts=call.num_experts,
        top_k=call.top_k,
        ep=call.ep,
        ranks_per_node=call.ranks_per_node,
        expert_groups=call.expert_groups,
        topk_groups=call.topk_groups,
    )


def deepep_s(call: DeepEPCall) -> float:
    """Seconds of one DeepEP dispatch or combine (module docstring); 0 with no tokens or ``ep`` 1."""
    if call.tokens <= 0 or call.ep <= 1:
        return 0.0
    fit = FITS[(call.mode, call.phase)]
    return transfer_s(fit, traffic_of(call), call.intra_bw_bytes_per_s, call.inter_bw_bytes_per_s)
