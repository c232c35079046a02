from simcast.core.layout import group_path, node_of, path_between, rank_groups
from simcast.core.specs import ParallelSpec


def test_rfc_rank_group_example():
    g = rank_groups(4, ParallelSpec(tp=2, pp=4, dp=1))
    assert g.pp_group.rank_group == (0, 2, 4, 6)
    assert g.pp_group.rank_in_group == 2
    assert g.tp_group.rank_group == (4, 5)
    assert g.dp_group.rank_group == (4,)


def test_dp_groups_stride_by_tp_times_pp():
    par = ParallelSpec(tp=2, pp=2, dp=2)
    g = rank_groups(5, par)
    assert g.tp_group.rank_group == (4, 5)
    assert g.pp_group.rank_group == (5, 7)
    assert g.dp_group.rank_group == (1, 5)


def test_links_follow_node_placement(h100):
    links = h100.links
    assert node_of(7, 8) == 0 and node_of(8, 8) == 1
    intra = path_between(0, 7, links, 16)
    inter = path_between(7, 8, links, 16)
    assert not intra.cross_node and intra.name == links.intra_node.name
    assert inter.cross_node and inter.name == links.inter_node.name
    assert intra.latency_s == links.intra_node.latency_s
    # a TP group straddling two nodes is limited by the inter-node link
    assert group_path(tuple(range(4, 12)), links, 16).name == links.inter_node.name
    assert group_path(tuple(range(0, 8)), links, 16).name == links.intra_node.name


def test_full_mesh_links_scale_with_group_size():
    # MI300X-like: 7 peer links sharing 448 GB/s; a pair sees one link, 8 GPUs drive all 7
    from simcast.core.device import LinkSpec, LinkTable

    mesh = LinkSpec(name="xgmi", bw_bytes_per_s=448e9, latency_s=5e-6, efficiency=0.7, mesh_links=7)
    ib = LinkSpec(name="ib", bw_bytes_per_s=50e9, latency_s=8e-6, efficiency=0.8)
    links = LinkTable(devices_per_node=8, intra_node=mesh, inter_node=ib)
    assert path_between(0, 1, links, 8).bw_bytes_per_s == 64e9
    assert group_path((0, 1), links, 8).bw_bytes_per_s == 64e9
    assert group_path((0, 1, 2, 3), links, 8).bw_bytes_per_s == 3 * 64e9
    assert group_path(tuple(range(8)), links, 8).bw_bytes_per_s == 448e9
    switched = LinkTable(
        devices_per_node=8,
        intra_node=LinkSpec(name="nvs", bw_bytes_per_s=450e9, latency_s=3e-6, efficiency=0.8),
        inter_node=ib,
    )
    assert group_path((0, 1), switched, 8).bw_bytes_per_s == 450e9


def test_same_node_pair_uses_intra_node_link_even_when_inter_node_latency_is_lower():
    # a slow-latency intra-node fabric (e.g. PCIe through a host bridge) beside a low-latency NIC:
    # two GPUs of one node still talk over the intra-node link; the topology decides, not the latency
    from simcast.core.device import LinkSpec, LinkTable

    pcie = LinkSpec(name="pcie", bw_bytes_per_s=32e9, latency_s=20e-6, efficiency=0.8)
    ib = LinkSpec(name="ib", bw_bytes_per_s=50e9, latency_s=2e-6, efficiency=0.8)
    links = LinkTable(devices_per_node=4, intra_node=pcie, inter_node=ib)
    same = path_between(0, 3, links, 8)
    assert same.name == "pcie" and not same.cross_node
    assert same.latency_s == 20e-6 and same.bw_bytes_per_s == 32e9
    other = path_between(3, 4, links, 8)
    assert other.name == "ib" and other.cross_node and other.latency_s == 2e-6
    assert group_path((0, 1, 2, 3), links, 8).name == "pcie"


def test_ascend_910b_pair_sees_one_28_gb_per_s_hccs_link():
    # the profile's own comment: 7 HCCS peer links x 28 GB/s per direction = 196 GB/s; a pair has one link
    from simcast.inputs.loaders import load_device

    links = load_device("ascend_910b").links
    assert path_between(0, 1, links, 8).bw_bytes_per_s == 28e9
    assert group_path((0, 1), links, 8).bw_bytes_per_s == 28e9
    assert group_path(tuple(range(8)), links, 8).bw_bytes_per_s == 196e9  # 8 NPUs drive all 7 links
