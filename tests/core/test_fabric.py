"""The inter-node fabric on the command line, PP hops over their slowest rank pair, hierarchical
collectives across nodes, and layer partitions as the engines take them (issue 16 items 3-4, issue 18).

Every expected time is computed by hand from the link numbers (latency + bytes / (bw * efficiency))."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_bad_input import DEV, SERVICE, bad, run, write

from simcast.core.assumption import Assumption, Partition, Topic
from simcast.core.device import LinkSpec, LinkTable
from simcast.core.fabrics import FABRICS, FabricChoice, fabric_links, with_fabric
from simcast.core.layout import group_path, pp_hop_cross_pairs, pp_hop_path, pp_hop_paths
from simcast.core.plan import SendRecvEdge
from simcast.core.specs import ParallelSpec
from simcast.cost.comm.time import all_gather_s, all_reduce_s, all_to_all_s, p2p_s
from simcast.engines.partition import canonical_partition, default_partition, partition_layers
from simcast.inputs.loaders import load_device
from simcast.render.assumption_text import assumption_text, inter_node_origin_text

MODEL = "Qwen/Qwen3-0.6B"  # hidden 1024, 28 layers, bf16

# tests/data/golden_device.yaml: intra 400 GB/s, 3 us, eff 0.8; inter 50 GB/s, 8 us, eff 0.8, no fits
GOLDEN = LinkTable(
    devices_per_node=8,
    intra_node=LinkSpec(name="test-nvlink", bw_bytes_per_s=4.0e11, latency_s=3.0e-6, efficiency=0.8),
    inter_node=LinkSpec(name="test-ib", bw_bytes_per_s=5.0e10, latency_s=8.0e-6, efficiency=0.8),
)
S = 8 * 2**20  # 8 MiB all-reduce message per rank


# ------------------------------------------------------------------------------------ fabric choice


def test_named_fabric_replaces_the_profile_link_and_says_so():
    links = fabric_links(GOLDEN, FabricChoice(fabric="tcp-100g"))
    ln = links.inter_node
    assert (ln.bw_bytes_per_s, ln.latency_s, ln.efficiency) == (12.5e9, 40e-6, 0.6)
    assert links.intra_node == GOLDEN.intra_node and links.devices_per_node == 8
    origin = links.inter_node_origin
    assert origin is not None and origin.fabric == "tcp-100g" and origin.bandwidth_gbps is None
    text = inter_node_origin_text(origin)
    assert text.startswith("named fabric tcp-100g (tcp-100g: ") and "nccl-tests issue #82" in text
    assert fabric_links(GOLDEN, FabricChoice()) is GOLDEN  # nothing given: the profile's, unchanged


def test_flag_precedence_profile_then_named_then_explicit():
    # explicit bandwidth and latency override the named fabric's; efficiency stays the fabric's
    ln = fabric_links(GOLDEN, FabricChoice(fabric="tcp-100g", bandwidth_gbps=25, latency_us=10)).inter_node
    assert (ln.bw_bytes_per_s, ln.latency_s, ln.efficiency) == (25e9, 10e-6, 0.6)
    # without a named fabric they override the profile's; the rest stays the profile's
    links = fabric_links(GOLDEN, FabricChoice(bandwidth_gbps=6.25))
    assert (links.inter_node.bw_bytes_per_s, links.inter_node.latency_s, links.inter_node.efficiency) == (
        6.25e9,
        8e-6,
        0.8,
    )
    origin = links.inter_node_origin
    assert origin is not None and origin.fabric == "" and origin.bandwidth_gbps == 6.25
    assert inter_node_origin_text(origin) == (
        "profile (test-ib); bandwidth 6.25 GB/s from --inter-node-bandwidth; efficiency 0.8 from profile"
    )


def test_every_named_fabric_cites_its_numbers():
    assert set(FABRICS) == {"ib-ndr", "ib-hdr", "roce-200g", "roce-400g", "tcp-100g", "tcp-25g"}
    gbps = {"ib-ndr": 400, "ib-hdr": 200, "roce-400g": 400, "roce-200g": 200, "tcp-100g": 100, "tcp-25g": 25}
    for name, f in FABRICS.items():
        assert f.bw_bytes_per_s == gbps[name] * 1e9 / 8  # line rate per GPU per direction
        for src in (f.bw_source, f.latency_source, f.efficiency_source):
            assert len(src) > 20
        assert "assumption" in f.efficiency_source or "fit" in f.efficiency_source


# ------------------------------------------------------------------------------------ hierarchical collectives


def _tree_or_ring(nbytes, n, lat, eff_bw):
    ring = 2 * (n - 1) * lat + 2 * (n - 1) / n * nbytes / eff_bw
    tree = 2 * {2: 1, 8: 3}[n] * lat + nbytes / eff_bw
    return min(ring, tree)


def test_hierarchical_all_reduce_by_hand():
    path = group_path(tuple(range(16)), GOLDEN, 16)  # 2 nodes x 8 ranks
    assert path.hierarchy is not None and (path.hierarchy.nodes, path.hierarchy.ranks_per_node) == (2, 8)
    # intra: tree over 8 ranks: 2*3*3us + S/(400e9*0.8) = 18 + 26.2144 us
    intra = 18e-6 + S / 3.2e11
    assert intra == pytest.approx(_tree_or_ring(S, 8, 3e-6, 3.2e11))
    # inter: the S/8 shard over 2 nodes: 2*8us + (S/8)/(50e9*0.8) = 16 + 26.2144 us
    inter = 16e-6 + (S / 8) / 4e10
    assert all_reduce_s(S, 16, path) == pytest.approx(intra + inter)
    assert all_reduce_s(S, 16, path) == pytest.approx(86.4288e-6)
    # all-gather producing S: inter over 2 nodes of S/8, then intra over 8 of S
    ag = (8e-6 + 0.5 * (S / 8) / 4e10) + (7 * 3e-6 + 7 / 8 * S / 3.2e11)
    assert all_gather_s(S, 16, path) == pytest.approx(ag)


def test_hierarchical_all_reduce_named_fabric_and_flags():
    tcp = fabric_links(GOLDEN, FabricChoice(fabric="tcp-100g"))
    intra = 18e-6 + S / 3.2e11
    # tcp-100g: 2*40 us + (S/8)/(12.5e9*0.6) = 80 + 139.81 us
    assert all_reduce_s(S, 16, group_path(tuple(range(16)), tcp, 16)) == pytest.approx(intra + 80e-6 + 2**20 / 7.5e9)
    assert all_reduce_s(S, 16, group_path(tuple(range(16)), tcp, 16)) == pytest.approx(264.0245e-6, rel=1e-5)
    flags = fabric_links(GOLDEN, FabricChoice(fabric="tcp-100g", bandwidth_gbps=25, latency_us=10))
    got = all_reduce_s(S, 16, group_path(tuple(range(16)), flags, 16))
    assert got == pytest.approx(intra + 20e-6 + 2**20 / 15e9)  # 25 GB/s x 0.6, 10 us


def test_a_fit_measured_on_the_whole_group_is_kept():
    """A cross-node link fitted on whole n-rank groups (a100_sxm_80gb's Vidur fits) keeps its fit for n."""
    from simcast.core.device import CollectiveFit

    fit = CollectiveFit(kind="all_reduce", gpus=16, latency_s=4e-4, bus_bw_bytes_per_s=2e10)
    inter = LinkSpec(name="fitted-ib", bw_bytes_per_s=5.0e10, latency_s=8.0e-6, efficiency=0.8, collectives=(fit,))
    links = LinkTable(devices_per_node=8, intra_node=GOLDEN.intra_node, inter_node=inter)
    assert all_reduce_s(S, 16, group_path(tuple(range(16)), links, 16)) == pytest.approx(4e-4 + 2 * 15 / 16 * S / 2e10)
    # replaced by a fabric, the fit goes (it was measured on the profile's fabric): hierarchical again
    tcp = fabric_links(links, FabricChoice(fabric="ib-ndr"))
    assert tcp.inter_node.collectives == ()


def test_all_to_all_across_nodes_splits_fabric_and_node_traffic():
    path = group_path(tuple(range(16)), GOLDEN, 16)
    sent = 15e6  # bytes to the 15 other ranks: 8 of them on the other node
    cross = sent * 8 / 15
    assert all_to_all_s(sent, path) == pytest.approx(max(8e-6 + cross / 4e10, 3e-6 + (sent - cross) / 3.2e11))
    assert all_to_all_s(sent, group_path(tuple(range(8)), GOLDEN, 16)) == pytest.approx(3e-6 + sent / 3.2e11)


def test_a_single_node_group_is_unchanged():
    path = group_path(tuple(range(8)), GOLDEN, 8)
    assert path.hierarchy is None and not path.cross_node
    ring = 2 * 7 * 3e-6 + 2 * 7 / 8 * S / 3.2e11
    tree = 2 * 3 * 3e-6 + S / 3.2e11
    assert all_reduce_s(S, 8, path) == pytest.approx(min(ring, tree))


# ------------------------------------------------------------------------------------ PP hop: slowest pair


def test_nvl72_tp16_pp8_hop_costs_its_infiniband_pairs():
    """GB200 NVL72 (72 GPUs per NVLink domain), TP16 x PP8: stage 3 = ranks 48-63, stage 4 = 64-79, so
    TP ranks 0-7 of hop 3->4 stay on NVLink (48->64 ... 55->71) and 8-15 cross to the next rack
    (56->72 ... 63->79). 1024 tokens of Llama-3.1-405B hidden + residual = 1024*16384*2 B*2 = 64 MiB."""
    dev = load_device("gb200")
    par = ParallelSpec(tp=16, pp=8)
    edge = SendRecvEdge(src_stage=3, dst_stage=4)
    nbytes = 1024 * 16384 * 2 * 2
    paths = pp_hop_paths(edge, par, dev.links)
    assert [p.cross_node for p in paths] == [False, True]
    assert pp_hop_cross_pairs(edge, par, dev.links) == 8
    hop = max(p2p_s(nbytes, p) for p in paths)
    assert hop == pytest.approx(1.8917e-5 + nbytes / (100e9 * 7.2756e-1))  # over InfiniBand
    assert hop == pytest.approx(941.3e-6, rel=1e-3)
    tp0 = 7.6488e-6 + nbytes / (900e9 * 8.0341e-1)  # what TP rank 0's NVLink pair alone would cost
    assert tp0 == pytest.approx(100.5e-6, rel=1e-3)
    assert pp_hop_path(edge, par, dev.links).cross_node
    # hops inside one rack keep NVLink
    assert [p.cross_node for p in pp_hop_paths(SendRecvEdge(src_stage=1, dst_stage=2), par, dev.links)] == [False]


@pytest.mark.slow
def test_simulate_charges_the_slowest_pair(capsys, tmp_path):
    """TP4 x PP2 on nodes of 6 with roce-200g: stage 0 = ranks 0-3 (node 0), stage 1 = 4-7; pairs 0->4 and
    1->5 stay in node 0, 2->6 and 3->7 cross to node 1. The receiver of each hop pays the slowest pair."""
    out = tmp_path / "r.json"
    rc, stdout, err = run(
        [
            "simulate",
            "--model",
            MODEL,
            "--device",
            DEV,
            "--tp",
            "4",
            "--pp",
            "2",
            "--devices-per-node",
            "6",
            "--fabric",
            "roce-200g",
            "--batch",
            "1",
            "--input-length",
            "512",
            "--microbatches",
            "1",
            "--json",
        ],
        capsys,
        seconds=300,
    )
    assert rc == 0, err
    import json

    r = json.loads(stdout)
    nbytes = 512 * 1024 * 2 * 2  # tokens x hidden x bf16 x (hidden + residual), every pair
    cross = 1.8917e-5 + nbytes / (25e9 * 7.2756e-1)  # roce-200g (ib-ndr's fitted latency and efficiency)
    (ev,) = r["send_recv_events"]
    assert ev["latency_s"] == pytest.approx(cross)
    assert ev["link"].startswith("roce-200g")
    assert r["stage_comm_times_s"][1] == pytest.approx(cross)
    text = "\n".join(r["assumptions"])
    layout = [a for a in r["assumptions"] if a.startswith(("inter-node link:", "PP hop:", "partition", "TP group"))]
    assert [a.split(":")[0] for a in layout] == [
        "inter-node link",
        "PP hop",
        "partition vllm",
        "TP group across nodes (2 nodes x 2 ranks)",
    ]
    assert "named fabric roce-200g" in text and "0->1 (2 of 4 pairs cross nodes)" in text
    assert "TP group across nodes (2 nodes x 2 ranks)" in text
    del out


# ------------------------------------------------------------------------------------ CLI and YAML


def test_fabric_flags_are_reported(capsys):
    rc, out, err = run(
        [
            "simulate",
            "--model",
            MODEL,
            "--device",
            DEV,
            "--pp",
            "2",
            "--devices-per-node",
            "1",
            "--fabric",
            "tcp-25g",
            "--inter-node-latency",
            "25",
            "--batch",
            "1",
            "--input-length",
            "128",
        ],
        capsys,
        seconds=300,
    )
    assert rc == 0, err
    assert "inter-node link: 3.125 GB/s per GPU per direction, 25 us, efficiency 0.6: named fabric tcp-25g" in out
    assert "latency 25 us from --inter-node-latency" in out


def test_service_yaml_fabric_keys(tmp_path):
    from simcast.serving.service_yaml import build_serving_config, read_service_yaml

    text = SERVICE.format(dev=DEV) + "  fabric: ib-hdr\n  inter_node_latency_us: 12\n"
    cfg, _ = build_serving_config(read_service_yaml(write(tmp_path, "s.yaml", text)), {})
    ln = cfg.device.links.inter_node
    assert (ln.bw_bytes_per_s, ln.latency_s) == (25e9, 12e-6)
    origin = cfg.device.links.inter_node_origin
    assert origin is not None and (origin.latency_us, origin.latency_field) == (
        12,
        "parallel_config.inter_node_latency_us",
    )
    # a flag overrides the YAML key
    cfg, _ = build_serving_config(
        read_service_yaml(write(tmp_path, "s.yaml", text)),
        {"inter_node_bandwidth_gbps": 3.0},
        {"inter_node_bandwidth_gbps": "--inter-node-bandwidth"},
    )
    assert cfg.device.links.inter_node.bw_bytes_per_s == 3e9


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--fabric", "infiniband"], "--fabric"),
        (["--inter-node-bandwidth", "0"], "--inter-node-bandwidth"),
        (["--inter-node-bandwidth", "nan"], "--inter-node-bandwidth"),
        (["--inter-node-bandwidth", "1e7"], "--inter-node-bandwidth"),
        (["--inter-node-latency", "-1"], "--inter-node-latency"),
        (["--inter-node-latency", "inf"], "--inter-node-latency"),
        (["--partition", "SGLANG_PP_LAYER_PARTITION=14,x"], "--partition"),
        (["--pp-layer-partition", "VLLM_PP_LAYER_PARTITION=10,10"], "must sum"),
    ],
)
def test_bad_fabric_and_partition_flags_exit_2_in_one_line(capsys, flags, needle):
    bad(["simulate", "--model", MODEL, "--device", DEV, "--pp", "2", *flags], capsys, needle)


@pytest.mark.parametrize(
    "extra, needle",
    [
        ("  fabric: infiniband\n", "parallel_config.fabric"),
        ("  inter_node_bandwidth_gbps: 0\n", "parallel_config.inter_node_bandwidth_gbps"),
        ("  inter_node_latency_us: -3\n", "parallel_config.inter_node_latency_us"),
    ],
)
def test_bad_yaml_fabric_keys_exit_2_in_one_line(capsys, tmp_path, extra, needle):
    bad(["serve-config", write(tmp_path, "s.yaml", SERVICE.format(dev=DEV) + extra)], capsys, needle)


# ------------------------------------------------------------------------------------ partitions


def test_partition_env_var_styles():
    for text in (
        "SGLANG_PP_LAYER_PARTITION=8,8,8,4",
        'SGLANG_PP_LAYER_PARTITION="8, 8, 8, 4"',
        "VLLM_PP_LAYER_PARTITION=8,8,8,4",
        "8,8,8,4",
        " 8, 8,8 ,4 ",
    ):
        assert canonical_partition(text) == "8,8,8,4"
        assert partition_layers(28, 4, text) == (8, 8, 8, 4)
    assert canonical_partition("sglang") == "sglang"


def test_engine_partition_rules_as_their_code():
    # 22 layers over 4 stages: vLLM remainder before the last, SGLang on the last, TensorRT-LLM on the first
    assert partition_layers(22, 4, "vllm") == (5, 6, 6, 5)
    assert partition_layers(22, 4, "sglang") == (5, 5, 6, 6)
    assert partition_layers(22, 4, "trtllm") == (6, 6, 5, 5)
    assert partition_layers(28, 3, "sglang") == (9, 9, 10)
    for rule in ("vllm", "sglang", "trtllm"):
        for layers in range(4, 40):
            for pp in range(1, 5):
                c = partition_layers(layers, pp, rule)
                assert sum(c) == layers and max(c) - min(c) <= 1
    assert [default_partition(e) for e in ("vllm", "sglang", "trtllm", "none", None)] == [
        "vllm",
        "sglang",
        "trtllm",
        "vllm",
        "vllm",
    ]
    line = assumption_text(
        Assumption(topic=Topic.PARTITION, facts=Partition(partition="sglang", layer_counts=(9, 9, 10)))
    )
    assert "SGLang" in line and "layer counts 9,9,10" in line


def test_engine_sglang_defaults_to_its_partition(capsys):
    args = ["simulate", "--model", MODEL, "--device", DEV, "--pp", "3", "--batch", "1", "--input-length", "64"]
    rc, out, err = run([*args, "--engine", "sglang"], capsys, seconds=300)
    assert rc == 0, err
    assert "partition sglang" in out and "layer counts 9,9,10" in out
    rc, out, err = run(
        [*args, "--engine", "sglang", "--pp-layer-partition", "SGLANG_PP_LAYER_PARTITION=10,9,9"], capsys, seconds=300
    )
    assert rc == 0, err
    assert "explicit layer counts 10,9,9" in out


def test_with_fabric_keeps_the_device_when_nothing_is_given():
    dev = load_device(str(Path(DEV)))
    assert with_fabric(dev, FabricChoice()) is dev
    assert with_fabric(dev, FabricChoice(fabric="ib-ndr")).links.inter_node.bw_bytes_per_s == 50e9
