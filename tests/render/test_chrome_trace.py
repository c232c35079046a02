"""Chrome trace export: Trace Event Format fields, slice nesting, metadata, CLI flag."""

import json

import pytest

from simcast.cli.main import main
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.render.chrome_trace import TIDS, chrome_trace, stage_segments
from simcast.sim.simulate import simulate

EPS_US = 2e-3  # timestamps are rounded to 1 ns


@pytest.fixture(scope="module")
def report(qwen06b, h100):
    return simulate(
        SimSpec(
            model=qwen06b,
            device=h100,
            parallel=ParallelSpec(tp=2, pp=3),
            batch=Batch.prefill(3, 100),
            num_microbatches=3,
        )
    )


def slices(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def check_format(trace):
    assert isinstance(trace["traceEvents"], list)
    json.dumps(trace)  # JSON-serialisable
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "M", "s", "f")
        assert isinstance(e["name"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            for key in ("name", "ph", "ts", "dur", "pid", "tid"):
                assert key in e
            assert e["ts"] >= 0 and e["dur"] >= 0


def check_nesting(trace):
    """On every thread, slices form a proper tree: any two are disjoint or one contains the other."""
    by_thread: dict = {}
    for e in slices(trace):
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list = []
        for e in evs:
            end = e["ts"] + e["dur"]
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - EPS_US:
                stack.pop()
            if stack:
                parent = stack[-1]
                assert end <= parent["ts"] + parent["dur"] + EPS_US, (e["name"], parent["name"])
            stack.append(e)


@pytest.mark.parametrize("mode", ["receiver", "blocking", "overlap"])
@pytest.mark.parametrize("detail", ["op", "layer", "stage"])
def test_format_and_nesting(report, mode, detail):
    tr = chrome_trace(report, send_recv=mode, detail=detail)
    check_format(tr)
    check_nesting(tr)
    xs = slices(tr)
    computes = [e for e in xs if e["cat"] == "compute"]
    assert len(computes) == 3 * 3  # stages x microbatches
    assert {e["pid"] for e in xs} == {0, 1, 2}
    # the last compute slice ends at the timeline's makespan
    end_us = max(e["ts"] + e["dur"] for e in computes)
    assert end_us == pytest.approx(tr["otherData"]["timeline_makespan_ms"] * 1e3, abs=EPS_US)
    if mode == "receiver":  # the default timeline is the one the report's latency assumes
        assert end_us == pytest.approx(report.latency_s * 1e6, abs=EPS_US)
    layers = [e for e in xs if e["cat"] == "layer"]
    ops = [e for e in xs if e["cat"] == "op"]
    assert (len(layers) > 0) == (detail != "stage") and (len(ops) > 0) == (detail == "op")


def test_children_inside_their_compute_slice_and_sum_to_it(report):
    tr = chrome_trace(report, detail="op")
    xs = slices(tr)
    for c in (e for e in xs if e["cat"] == "compute"):
        kids = [
            e
            for e in xs
            if e["cat"] == "layer"
            and e["pid"] == c["pid"]
            and e["tid"] == c["tid"]
            and c["ts"] - EPS_US <= e["ts"]
            and e["ts"] + e["dur"] <= c["ts"] + c["dur"] + EPS_US
        ]
        st = report.stages[c["pid"]]
        assert len(kids) == st.num_layers + (1 if st.stage_id == 0 else 0) + (1 if st.stage_id == 2 else 0)
        assert sum(k["dur"] for k in kids) == pytest.approx(c["dur"], abs=EPS_US * len(kids))
        assert sum(k["args"]["flops"] for k in kids) == pytest.approx(c["args"]["flops"], rel=1e-9)
    op = next(e for e in xs if e["cat"] == "op")
    assert {"flops", "bytes", "bound"} <= set(op["args"])


def test_metadata_names_every_process_and_thread(report):
    tr = chrome_trace(report)
    meta = [e for e in tr["traceEvents"] if e["ph"] == "M"]
    procs = {e["pid"]: e["args"]["name"] for e in meta if e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert sorted(procs) == [0, 1, 2] and "layers" in procs[0]
    assert threads == {(p, t): lane for p in range(3) for lane, t in TIDS.items()}
    used = {(e["pid"], e["tid"]) for e in slices(tr)}
    assert used <= set(threads)


@pytest.mark.parametrize("mode", ["receiver", "overlap"])
def test_send_recv_slices_and_flows(report, mode):
    tr = chrome_trace(report, send_recv=mode)
    xs = slices(tr)
    sends = [e for e in xs if e["tid"] == TIDS["send"]]
    recvs = [e for e in xs if e["tid"] == TIDS["recv"]]
    assert len(sends) == len(recvs) == 2 * 3  # hops x microbatches
    assert all(e["args"]["bytes"] > 0 and e["args"]["link"] for e in sends)
    flows = [e for e in tr["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(flows) == 2 * len(sends) and {e["id"] for e in flows if e["ph"] == "s"} == {
        e["id"] for e in flows if e["ph"] == "f"
    }


def test_layer_names_follow_stage_layers(report):
    st = report.stages[1]
    groups = stage_segments(st.ops, st.start_layer, st.num_layers)
    assert [g for g, _ in groups] == [f"layer {i}" for i in range(st.start_layer, st.end_layer)]
    names = [n for n, _ in groups[0][1]]
    assert names.count("qkv_proj") == names.count("down_proj") == 1


def test_cli_trace_flag(tmp_path, capsys):
    out = tmp_path / "t.json"
    rc = main(
        [
            "simulate",
            "--model",
            "Qwen/Qwen3-0.6B",
            "--device",
            "h100_sxm",
            "--pp",
            "2",
            "--batch",
            "2",
            "--input-length",
            "64",
            "--trace",
            str(out),
        ]
    )
    assert rc == 0
    tr = json.loads(out.read_text())
    check_format(tr)
    check_nesting(tr)
    assert "wrote" in capsys.readouterr().err


def test_auto_detail_falls_back_to_keep_files_small(report, monkeypatch):
    import simcast.render.chrome_trace as ct

    assert ct.choose_detail(report) == "op"
    monkeypatch.setattr(ct, "MAX_SLICES", 150)  # ~100 layer slices, ~1000 op slices
    assert ct.choose_detail(report) == "layer"
    monkeypatch.setattr(ct, "MAX_SLICES", 5)
    assert ct.choose_detail(report) == "stage"
    with pytest.raises(ValueError):
        ct.choose_detail(report, "ops")


@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_many_microbatches_stay_under_20_mb(qwen06b, h100):
    r = simulate(
        SimSpec(
            model=qwen06b,
            device=h100,
            parallel=ParallelSpec(tp=1, pp=4),
            batch=Batch.decode(512, 1024),
            num_microbatches=512,
        )
    )
    size = len(json.dumps(chrome_trace(r), separators=(",", ":")))
    assert size < 20e6
