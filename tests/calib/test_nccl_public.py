"""NCCL's own all-reduce of the shipped links against public NCCL timings (benchmarks/data/nccl_tests_public.csv).

The rows are transcribed from public pages (each row cites its URL; benchmarks/data/nccl_tests_public.md);
nothing is fitted on them, so every error below is held out. Bounds are the errors reported in
docs/accuracy.md ("NCCL's own all-reduce") plus a margin.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simcast.calib.profiles.profile_doc import exact_bytes, flow
from simcast.calib.readers import aic_db
from simcast.calib.validation import public_nccl as pn
from simcast.core.device import CollectiveFit
from simcast.cost.comm.collectives import factor, regime_for, regimes
from simcast.inputs.loaders import load_device

CSV = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "nccl_tests_public.csv"


@pytest.fixture(scope="module")
def pred():
    return pn.predict(pn.load(CSV))


def _errs(pred, system, harness, gpus=None, lo=0, hi=2**60):
    sel = (pred.system == system) & (pred.harness == harness) & pred.size_bytes.between(lo, hi - 1)
    if gpus is not None:
        sel &= pred.gpus == gpus
    return pred.loc[sel, "err_pct"].to_numpy(float)


def test_every_row_is_cited_and_names_its_harness():
    rows = pn.load(CSV)
    assert len(rows) >= 170
    assert set(rows.harness) <= set(pn.HARNESSES)
    assert rows.source_url.str.startswith("https://github.com/").all()
    assert set(rows.system) <= {"h100_sxm", "h200_sxm", "b200"}
    assert rows[rows.harness.isin(pn.JUDGE)].groupby("source_url").size().min() >= 12  # whole tables, not points
    assert (rows.harness == pn.LIKE_FOR_LIKE).sum() >= 60
    assert rows.harness.isin(pn.JUDGE).sum() >= 130


def test_published_bus_bandwidth_matches_size_over_time():
    """A transcription check: nccl-tests' busbw is 2(n-1)/n · size / time (GB/s = 1e9 B/s), to its 2 decimals."""
    rows = pn.load(CSV)
    rows = rows[rows.busbw_gbps.notna()]
    fac = np.array([factor("all_reduce", int(n)) for n in rows.gpus])
    implied = fac * rows.size_bytes.to_numpy(float) / rows.time_us.to_numpy(float) / 1e3
    ok = np.isclose(implied, rows.busbw_gbps.to_numpy(float), rtol=0.015, atol=0.006)
    assert ok.all(), rows[~ok][["source_url", "size_bytes", "time_us", "busbw_gbps"]]


def test_hopper_bridge_against_public_nccl_tests_rows(pred):
    """8x H100, nccl-tests 1-32 KiB (NVIDIA/nccl #2094, NCCL 2.28 / 2.29.7): the link's small-message regime,
    bridged from the database's own H100 NCCL 2.23 reduce-scatter + all-gather (simcast.calib.fitting.nccl_bridge),
    is ~43 % faster than that machine (reported 43.4 % median, p90 45.4 %; the B200 transfer was 20.2 % faster),
    every row below the measurement: the direction is part of what docs/accuracy.md says."""
    e = _errs(pred, "h100_sxm", "nccl-tests", 8)
    assert len(e) == 12
    assert np.median(np.abs(e)) <= 47.0
    assert np.percentile(np.abs(e), 90) <= 49.0
    assert (e < 0).all() and (e > -50.0).all()


def test_h200_large_messages_and_the_latency_floor(pred):
    """8x H200 torch.distributed sweep (ml-engineering): >= 64 MiB within 0.8 % median (max 1.7 %); below
    1 MiB the blocking call adds launch and barrier skew, and the fit is 46 % faster (median)."""
    big = _errs(pred, "h200_sxm", "torch-eager", 8, lo=64 * 2**20)
    assert len(big) == 9
    assert np.median(np.abs(big)) <= 2.0 and np.abs(big).max() <= 3.0
    small = _errs(pred, "h200_sxm", "torch-eager", 8, hi=2**20)
    assert len(small) == 5
    assert np.median(np.abs(small)) <= 50.0 and (small < 0).all()


def _band(pred, gpus, label, harnesses=pn.JUDGE):
    p = pred[pred.harness.isin(harnesses) & pred.system.isin(["h100_sxm", "h200_sxm"]) & (pred.gpus == gpus)]
    return p.loc[pn.band(p.size_bytes) == label, "err_pct"].to_numpy(float)


def test_band_labels_split_at_64_kib_and_8_mib():
    import pandas as pd

    got = pn.band(pd.Series([1, 65536, 65537, 8 * 2**20 - 1, 8 * 2**20, 2**33])).tolist()
    assert got == ["<=64KiB", "<=64KiB", "64KiB-8MiB", "64KiB-8MiB", ">=8MiB", ">=8MiB"]


def test_hopper_links_per_group_size_and_band(pred):
    """The judge rows (nccl-tests, default or NVLS algorithm) per group size and band, as docs/accuracy.md
    reports them: 8 GPUs 31.9 / 17.9 / 1.5 % (<=64 KiB / 64 KiB-8 MiB / >=8 MiB; the B200 transfer: 14.3 / 7.8 /
    1.5), faster than measured below 64 KiB; 4 GPUs (one 4x H100 sweep) 51.8 / 30.5 / 6.4 % (34.9 / 19.4 / 6.4):
    the database's H100 floor is far below these machines' floors."""
    e8 = [_band(pred, 8, b) for b in ("<=64KiB", "64KiB-8MiB", ">=8MiB")]
    assert [len(e) for e in e8] == [35, 24, 45]
    assert np.median(np.abs(e8[0])) <= 35.0 and np.median(e8[0]) < 0
    assert np.median(np.abs(e8[1])) <= 21.0 and np.median(np.abs(e8[2])) <= 3.0
    e4 = [_band(pred, 4, b) for b in ("<=64KiB", "64KiB-8MiB", ">=8MiB")]
    assert [len(e) for e in e4] == [14, 6, 8]
    assert (e4[0] < -45.0).all() and np.median(np.abs(e4[0])) <= 55.0
    assert np.median(np.abs(e4[2])) <= 8.0


def test_public_small_message_floor_spans_the_links(pred):
    """At 8 GPUs and <= 32 KiB the public nccl-tests floors bracket the bridged link: NCCL 2.30.7 on H200
    (ml-engineering) is slower-predicted (+17 %), NVIDIA/nccl #2094 (2.28 / 2.29.7 on H100) faster (-43 %)."""
    p = pred[(pred.gpus == 8) & (pred.harness == "nccl-tests") & (pred.size_bytes <= 32 * 2**10)]
    by = p.groupby(pn.publisher(p.source_url))["err_pct"].median()
    assert by["stas00"] > 10.0 and by["NVIDIA"] < -35.0


def test_summary_by_band_matches_the_rows(pred):
    t = pn.band_summary(pred).set_index(["gpus", "band"])
    assert t.loc[(8, "<=64KiB"), "rows"] == 35 and t.loc[(8, "<=64KiB"), "publishers"] == "Azure NVIDIA stas00"
    assert t.loc[(4, ">=8MiB"), "median_abs_err_pct"] == pytest.approx(np.median(np.abs(_band(pred, 4, ">=8MiB"))))
    assert list(t.loc[8].index) == ["<=64KiB", "64KiB-8MiB", ">=8MiB"]


def test_with_small_latency_moves_only_the_small_regime():
    dev = load_device("h100_sxm")
    moved = pn.with_small_latency(dev, 1e-6, (4,))
    for a, b in zip(dev.links.intra_node.collectives, moved.links.intra_node.collectives):
        lift = 1e-6 if (a.gpus, a.algorithm) == (4, "nccl_small") else 0.0
        assert b.latency_s == pytest.approx(a.latency_s + lift) and b.bus_bw_bytes_per_s == a.bus_bw_bytes_per_s


def test_offset_check_on_the_bridged_links():
    """Leave one publisher out: a Hopper small-message latency offset (9-13 us) fitted on the other publishers'
    8-GPU rows and added to the bridged links helps the held-out NVIDIA/nccl #2094 rows (43.4 -> ~16 %), Azure's
    NVLS sweeps below 8 MiB (~30 -> ~14 %) and the 4-GPU sweep below 64 KiB (51.8 -> ~12 %), but worsens the
    NCCL 2.30.7 H200 sweep (16.5 -> ~70 % below 64 KiB): the public floors disagree among themselves by ~2x, and
    the shipped links follow the database's own H100/H200 rows (docs/accuracy.md)."""
    t = pn.offset_check(pn.load(CSV)).set_index(["held_out", "gpus", "band"])
    assert set(t.index.get_level_values(0)) == {"Azure", "NVIDIA", "dudeperf3ct", "stas00"}
    assert (t.offset_us > 8.0).all() and (t.offset_us < 14.0).all()  # the public floors sit above the database's
    better = t.offset_median < t.transfer_median - 3.0
    worse = t.offset_median > t.transfer_median + 5.0
    assert better[("NVIDIA", 8, "<=64KiB")] and better[("dudeperf3ct", 4, "<=64KiB")]
    assert better[("Azure", 8, "<=64KiB")] and better[("Azure", 8, "64KiB-8MiB")]
    assert worse[("stas00", 8, "<=64KiB")] and worse[("stas00", 8, "64KiB-8MiB")]


def test_b200_own_table_fit_against_public_pynccl_rows(pred):
    """B200's link fit (its own nccl-tests table) on vLLM's pynccl 2-GPU rows (CUDA graphs): 8.6 % median."""
    e = _errs(pred, "b200", "pynccl-cudagraph", 2)
    assert len(e) == 3
    assert np.median(np.abs(e)) <= 12.0


@pytest.mark.parametrize("system", ["h100_sxm", "h200_sxm"])
def test_a_message_of_exactly_a_breakpoint_stays_in_its_regime(system):
    """A regime covers its last measured size: the profile holds the bound exactly (not 4.1943e+6 < 4 MiB)."""
    fits = load_device(system).links.intra_node.collectives
    for n in sorted({f.gpus for f in fits}):
        regs = regimes(fits, "all_reduce", n)
        for f in regs[:-1]:
            assert float(f.max_bytes).is_integer()
            assert regime_for(regs, f.max_bytes) is f
    # and the writer keeps it exact (5 significant digits would write 4.1943e+6)
    assert exact_bytes(4194304.0).text == "4194304.0" and exact_bytes(0.0).text == "0.0"
    fit = CollectiveFit(kind="all_reduce", gpus=8, latency_s=1e-5, bus_bw_bytes_per_s=3e11, max_bytes=4194304.0)
    assert flow(fit, ("max_bytes", "algorithm"))["max_bytes"].text == "4194304.0"


needs_db = pytest.mark.skipif(not aic_db.available(), reason="needs the optional extra aiconfigurator-core")


@needs_db
@pytest.mark.measured
@pytest.mark.slow  # builds every donor's fit: ~15 s of CPU
def test_public_rows_rank_the_donors_as_the_held_out_check_does():
    """Carried to H100 as shipped, each candidate donor on the public nccl-tests rows: B200 lowest (20.7 %),
    then B300 (22.8 %), GB200 (32.5 %), A100 (33.1 %), GB300 (35.5 %) on the 40 rows of 4 and 8 GPUs; on the
    H200 rows (NCCL 2.30.7) B200 is lowest too (5.1 %)."""
    from simcast.calib.fitting import nccl_transfer as nt

    cands = nt.donors()
    table = pn.donor_check(pn.load(CSV), cands)
    h100 = table[table.target == "h100_sxm"].set_index("donor")["median_abs_err_pct"]
    best = str(h100.idxmin()).split(" ")[0]
    assert best == nt.choose(nt.check(cands)) == "b200_sxm"
    assert h100.min() <= 25.0
    h200 = table[table.target == "h200_sxm"].set_index("donor")["median_abs_err_pct"]
    assert str(h200.idxmin()).split(" ")[0] == "b200_sxm"
