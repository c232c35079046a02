"""NCCL all-reduce below 1 MiB from a system's own reduce-scatter + all-gather (simcast.calib.fitting.nccl_bridge)."""

from __future__ import annotations

import pandas as pd
import pytest

from simcast.calib.fitting import nccl_bridge as nb
from simcast.calib.readers import aic_db
from simcast.core.device import CollectiveFit

MIB = 2**20


def _sums(rows: list[tuple[int, int, float]]) -> pd.DataFrame:
    idx = pd.MultiIndex.from_tuples([(g, b) for g, b, _ in rows], names=["gpus", "bytes"])
    return pd.DataFrame({"sum_s": [t for _, _, t in rows]}, index=idx)


def test_derived_rows_scale_the_sum_below_1_mib_and_take_the_transfer_above():
    # 8 GPUs: far line t = 26 us + 1.75 * bytes / 400 GB/s; k = 0.75; 16 GPUs has no share -> dropped
    far = (CollectiveFit(kind="all_reduce", gpus=8, latency_s=26e-6, bus_bw_bytes_per_s=400e9),)
    sums = _sums([(8, 4096, 20e-6), (8, MIB // 2, 30e-6), (8, MIB, 40e-6), (8, 4 * MIB, 80e-6), (16, 4096, 9.0)])
    rows = nb.derived_rows(sums, {8: 0.75}, far)
    got = dict(zip(rows["bytes"], rows["time_s"]))
    assert list(rows["gpus"].unique()) == [8] and len(rows) == 4
    assert got[4096] == pytest.approx(15e-6) and got[MIB // 2] == pytest.approx(22.5e-6)
    assert got[MIB] == pytest.approx(26e-6 + 1.75 * MIB / 400e9)  # 1 MiB itself is in the transferred band
    assert got[4 * MIB] == pytest.approx(26e-6 + 1.75 * 4 * MIB / 400e9)


def test_share_is_the_median_over_tables_and_can_leave_a_system_out():
    table = pd.DataFrame(
        {
            "system": ["a", "a", "b", "c", "c"],
            "version": ["1", "2", "1", "1", "1"],
            "gpus": [2, 2, 2, 2, 8],
            "k": [0.55, 0.57, 0.60, 0.70, 0.78],
        }
    )
    assert nb.k_per_gpus(table) == {2: pytest.approx(0.585), 8: pytest.approx(0.78)}
    assert nb.k_per_gpus(table, exclude="c") == {2: pytest.approx(0.57)}


def test_ratios_take_the_median_below_1_mib_per_table_and_group_size(monkeypatch):
    # all-reduce = 0.6 x (RS + AG) below 1 MiB, 0.95 x above (must not count); one size lacks all-reduce
    sizes = [1024, 4096, 65536, MIB, 8 * MIB]
    idx = pd.MultiIndex.from_tuples([(4, b) for b in sizes], names=["gpus", "bytes"])
    rs = pd.Series([10e-6, 11e-6, 12e-6, 20e-6, 60e-6], index=idx)
    ag = rs * 1.1
    ar = (rs + ag) * pd.Series([0.6, 0.6, float("nan"), 0.95, 0.95], index=idx)
    frame = pd.DataFrame({"all_reduce": ar, "reduce_scatter": rs, "all_gather": ag})
    monkeypatch.setattr(aic_db, "versions", lambda system, kind, engine: ["9.9"])
    monkeypatch.setattr(nb, "_times", lambda system, version, ops: frame)
    got = nb.ratios(("x",))
    assert got.to_dict("records") == [{"system": "x", "version": "9.9", "gpus": 4, "k": pytest.approx(0.6), "sizes": 2}]


needs_db = pytest.mark.skipif(not aic_db.available(), reason="needs the optional extra aiconfigurator-core")


@needs_db
@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_the_bridge_predicts_held_out_tables_below_1_mib():
    """Each NVSwitch table with all three collectives, its share and donor from the other systems: below 1 MiB
    within 6 % median and 15 % p90 on the odd half of its measured all-reduce (the transfer alone reaches 7.5 /
    22.3 % on A100, the one non-Blackwell target)."""
    table = nb.check()
    bridge = table[table["fit"] == "bridge"]
    assert len(bridge) >= 8
    assert (bridge["below_1MiB_median"] <= 6.0).all() and (bridge["below_1MiB_p90"] <= 15.0).all(), bridge


@needs_db
@pytest.mark.parametrize("system", ["h100_sxm", "h200_sxm"])
@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_shipped_hopper_links_carry_the_bridge(system):
    """The shipped profile's NCCL fit is the bridge (re-derived here) from the system's own NCCL 2.23
    reduce-scatter + all-gather rows, never the reserved tables (the reader refuses them)."""
    from simcast.inputs.loaders import load_device

    got = nb.bridge(system)
    assert got is not None
    fits, note = got
    assert f"{system}/comm/nccl/2.23/nccl_perf" in note
    assert f"{system}/comm/nccl/2.29.2" not in note and f"{system}/comm/nccl/2.2" not in note.replace("2.23/", "")
    shipped = load_device(system).links.intra_node.collectives
    assert sorted((f.gpus, f.algorithm) for f in shipped) == sorted((f.gpus, f.algorithm) for f in fits)
    for f in fits:  # the profile prints five significant digits
        s = next(x for x in shipped if (x.gpus, x.algorithm) == (f.gpus, f.algorithm))
        assert s.max_bytes == pytest.approx(f.max_bytes, rel=1e-4)
        assert s.latency_s == pytest.approx(f.latency_s, rel=1e-4)
        assert s.bus_bw_bytes_per_s == pytest.approx(f.bus_bw_bytes_per_s, rel=1e-4)
