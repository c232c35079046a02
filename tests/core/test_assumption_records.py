"""Assumptions are typed records (``simcast/core/assumption.py``), worded only in ``render/assumption_text.py``,
and selected by topic, never by their text."""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from pathlib import Path

import pytest

from simcast.core import assumption as A
from simcast.core.assumption import FACTS, LAYOUT_TOPICS, Assumption, Note, Topic, of_topic
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.inputs.loaders import load_device
from simcast.render.assumption_text import FORMATTERS, assumption_lines, assumption_text
from simcast.sim.simulate import simulate

PKG = Path(__file__).resolve().parents[2] / "simcast"
GOLDEN_DEVICE = Path(__file__).parents[1] / "data" / "golden_device.yaml"

_SAMPLE = {str: "x", int: 2, float: 1.5, bool: True}


def _sample(cls: type) -> object:
    """An instance of a facts dataclass with a plain value in every field (empty tuples, ``None`` where allowed)."""
    hints = typing.get_type_hints(cls)
    kw = {}
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        kw[f.name] = () if typing.get_origin(t) is tuple else _SAMPLE.get(t)
        if f.name == "partition":  # a partition the plan has read (canonical_partition refuses "x")
            kw[f.name] = "vllm"
    return cls(**kw)


def test_every_topic_has_a_formatter_and_renders_one_line():
    assert set(FORMATTERS) == set(Topic)
    for topic in Topic:
        line = assumption_text(Assumption(topic=topic, facts=_sample(FACTS.get(topic, Note))))
        assert line and "\n" not in line and "{" not in line, (topic, line)


def test_a_record_refuses_facts_of_another_topic():
    with pytest.raises(TypeError, match="facts must be PpHop"):
        Assumption(topic=Topic.PP_HOP, facts=A.Mla(cache_width_elements=576))
    with pytest.raises(TypeError, match="facts must be Note"):
        Assumption(topic=Topic.STEADY_STATE, facts=A.Schedule())


_TEXT_PICK = re.compile(r"assumptions?\b[^\n]*\.startswith\(|assumptions\[\s*-?\d*\s*:?\s*-?\d*\s*\]")


def test_no_caller_picks_assumptions_by_their_text_or_position():
    """Selection goes by topic (``of_topic``, ``LAYOUT_TOPICS``); a prefix table or an index into the rendered
    lines would silently miss a line whose wording changed."""
    bad = []
    for path in PKG.rglob("*.py"):
        src = path.read_text()
        for n, line in enumerate(src.splitlines(), 1):
            if _TEXT_PICK.search(line) or "LAYOUT_LINE_PREFIXES" in line or "layout_lines(" in line:
                bad.append(f"{path.relative_to(PKG.parent)}:{n}: {line.strip()}")
    assert bad == []


def test_the_pattern_catches_the_old_picks():
    """The grep above must be able to fail: the lines it replaced match it."""
    old = [
        "return next((a for a in report.assumptions if a.startswith(head)), None)",
        "+ pre.assumptions[:2]",
        "assert x in pp2.assumptions[1]",
    ]
    assert all(_TEXT_PICK.search(s) for s in old)


def test_record_producers_build_no_sentences():
    """``sim/assumptions.py`` states facts only: no f-string, no string concatenation of words."""
    tree = ast.parse((PKG / "sim" / "assumptions.py").read_text())
    assert not [n.lineno for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)]


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
@pytest.mark.parametrize("devices_per_node", [2, 6])
def test_pp2_tp2_across_two_nodes_states_the_hop_and_the_fabric(qwen06b, devices_per_node):
    """Hand case on tests/data/golden_device.yaml (test-ib: 5e10 B/s, 8 us, efficiency 0.8).

    Ranks ``[dp, pp, tp]``: rank = 4 dp + 2 pp + tp. Two devices per node, DP 1: stage 0 (ranks 0, 1) on node 0,
    stage 1 (ranks 2, 3) on node 1, so both pairs of the hop cross nodes (no mixed hop). Six per node, DP 2:
    replica 0's pairs (0->2, 1->3) stay on node 0, replica 1's (4->6 node 0 -> node 1, 5->7 node 0 -> node 1)
    cross: the hop mixes them, 2 of 4 pairs. Either way the hop costs its slowest pair, the inter-node one:
    8e-6 + 512 tokens x 1024 hidden x 2 B x 2 tensors / (5e10 x 0.8) = 8e-6 + 52.4288e-6 = 60.4288e-6 s.
    """
    dev = load_device(str(GOLDEN_DEVICE), devices_per_node=devices_per_node)
    dp = 1 if devices_per_node == 2 else 2
    spec = SimSpec(
        model=qwen06b,
        device=dev,
        parallel=ParallelSpec(tp=2, pp=2, dp=dp),
        batch=Batch.prefill(1, 512),
        num_microbatches=1,
    )
    r = simulate(spec)
    assert r.runtime.send_recv_events[0].latency_s == pytest.approx(60.4288e-6, rel=1e-12)

    (fabric,) = of_topic(r.assumptions, Topic.INTER_NODE)
    assert fabric.facts == A.InterNodeLink(
        bw_bytes_per_s=5e10, latency_s=8e-6, efficiency=0.8, link_name="test-ib", origin=None
    )
    assert assumption_text(fabric) == (
        "inter-node link: 50 GB/s per GPU per direction, 8 us, efficiency 0.8 from the device profile (test-ib)"
    )
    (hop,) = of_topic(r.assumptions, Topic.PP_HOP)
    mixed = () if dp == 1 else (A.MixedHop(src_stage=0, dst_stage=1, cross_node_pairs=2, pairs=4),)
    assert hop.facts == A.PpHop(tp_sharded_send=False, mixed_hops=mixed)
    assert assumption_text(hop).endswith(
        "each see their share)"
        if dp == 1
        else "; hops mixing intra- and inter-node pairs: 0->1 (2 of 4 pairs cross nodes)"
    )
    (send,) = of_topic(r.assumptions, Topic.PP_SEND)
    links = {("test-ib", True)} | (set() if dp == 1 else {("test-nvlink", False)})
    assert set(send.facts.links) == links  # type: ignore[attr-defined]
    assert not of_topic(r.assumptions, Topic.TP_ACROSS_NODES)  # each TP pair shares a node
    (part,) = of_topic(r.assumptions, Topic.PARTITION)
    assert part.facts == A.Partition(partition="vllm", layer_counts=(14, 14))  # Qwen3-0.6B: 28 layers
    # the layout records, in report order, are what the serving estimate repeats
    assert [a.topic for a in r.assumptions if a.topic in LAYOUT_TOPICS] == [
        Topic.INTER_NODE,
        Topic.PP_HOP,
        Topic.PARTITION,
    ]
    # the JSON form is the rendered lines, one per record
    assert len(assumption_lines(r.assumptions)) == len(r.assumptions)


def test_chunk_line_names_the_chunks_and_the_engine_rule():
    facts = A.ChunkedPipeline(chunk_tokens=(8192,) * 15 + (8000,), max_in_flight=2, engine_rule="trtllm", note="given")
    line = assumption_text(Assumption(topic=Topic.CHUNKED_PREFILL, facts=facts))
    assert line.startswith("chunked pipeline prefill: 16 chunks of one prompt (8192 x15, 8000 tokens) ")
    assert "at most 2 in flight" in line
    assert line.endswith(
        "; given; trtllm: a chunk waits until the previous chunk has left the last stage ("
        + ("tensorrt_llm/_torch/pyexecutor/py_executor.py (a stored version; upstream head not verified))")
    )
    free = A.ChunkedPipeline(chunk_tokens=(4096, 4096), max_in_flight=None, engine_rule="", note="")
    assert assumption_text(Assumption(topic=Topic.CHUNKED_PREFILL, facts=free)).endswith(
        "over chunks; no engine rule: chunks overlap across stages, no in-flight cap"
    )
