"""Sweeps on a process pool or Ray (same results as serial), the backend choice, and --refine-top
(the bisection bracket: the reported rate meets the p90 TTFT limit, the next one does not)."""

import json
import math
import sys
import types
from dataclasses import replace
from pathlib import Path

import pytest

from simcast.cli.main import main
from simcast.core.errors import SimcastInputError
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.search import parallel
from simcast.serving.search.layouts import SearchSpace, meets, powers_of_two, search
from simcast.serving.search.parallel import Backend, choose_backend, pmap
from simcast.serving.search.refine import probe, refine_layout, refine_task
from simcast.serving.steady.model import ServingConfig, Workload, estimate_serving

HERE = Path(__file__).parents[1]
DEV = str(HERE / "data" / "golden_device.yaml")


def _square(x: int) -> int:
    return x * x


@pytest.mark.slow
def test_pmap_keeps_order_on_every_local_backend():
    items = [5, 3, 8, 1]
    assert pmap(_square, items) == [25, 9, 64, 1]
    assert pmap(_square, items, backend=Backend(kind="process", workers=2)) == [25, 9, 64, 1]


def test_choose_backend_decides_by_the_work(monkeypatch):
    monkeypatch.setattr(parallel, "available_cpus", lambda: 2)
    # 10 layouts of 30 ms: a pool of 2 saves 0.15 s, less than its start-up -> serial
    assert choose_backend(10, task_s=0.03) == Backend()
    # 40 layouts compiling traces (~0.3 s each): saves 6 s -> a pool of 2
    assert choose_backend(40, task_s=0.3) == Backend(kind="process", workers=2)
    # the same with a start-up that eats the gain (torch imported in every worker) -> serial
    assert choose_backend(6, task_s=0.3, startup_s=2.4) == Backend()
    assert choose_backend(1, task_s=100.0) == Backend()  # one task: nothing to share
    monkeypatch.setattr(parallel, "available_cpus", lambda: 1)
    assert choose_backend(40, task_s=10.0) == Backend()  # one CPU: a pool only adds start-up
    # explicit choices win over the estimate
    assert choose_backend(10, task_s=0.0, workers=4) == Backend(kind="process", workers=4)
    assert choose_backend(3, task_s=0.0, workers=8) == Backend(kind="process", workers=3)
    assert choose_backend(10, task_s=9.0, workers=1) == Backend()
    assert choose_backend(10, task_s=0.0, ray_address="auto") == Backend(kind="ray", ray_address="auto")


def test_progress_bar_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert parallel._progress(10, "x", None) is None
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    bar = parallel._progress(10, "x", None)
    assert bar is not None
    bar.close()
    assert parallel._progress(10, "x", False) is None


@pytest.fixture(scope="module")
def base06b():
    return ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-0.6B"),
            device=load_device(DEV),
            parallel=ParallelSpec(world_size=1),
            engine="vllm",
        ),
        workload=Workload(input_length=1024, output_length=256),
        batch_size=1,
    )


@pytest.mark.slow
def test_serial_and_pool_give_equal_results(base06b):
    from pandas.testing import assert_frame_equal

    from simcast.render.search_tables import points_dataframe
    from simcast.trace.cache import clear_memory_cache

    sp = SearchSpace(tp_sizes=(1, 2, 4), pp_sizes=(1, 2), num_devices=4, tpot_limit_s=0.008)
    first = search(base06b, sp, workers=1)  # compiles the traces into the disk cache the workers share
    pool = search(base06b, sp, workers=2)
    assert_frame_equal(
        points_dataframe(first[0], lambda r: meets(r, sp)), points_dataframe(pool[0], lambda r: meets(r, sp))
    )
    assert first[1] == pool[1] and len(first[0]) == 5  # rejections too, in order
    # field by field: equal once both read the traces from disk (a Report counts the traces it compiled)
    clear_memory_cache()
    assert search(base06b, sp, workers=1) == pool


def _bad_input(x: int) -> int:
    raise SimcastInputError("--x", x, "must be even")


@pytest.mark.slow
def test_a_workers_input_error_reaches_the_caller_unchanged():
    with pytest.raises(SimcastInputError, match=r"^--x: got 3; must be even$"):
        pmap(_bad_input, [3, 5], backend=Backend(kind="process", workers=2))


@pytest.mark.slow
def test_refinements_equal_on_every_backend(base06b):
    tasks = [
        refine_task(
            estimate_serving(replace(base06b.redeployed(parallel=ParallelSpec(tp=tp)), batch_size=64)).config,
            steady_tokens_per_s=4000.0 * tp,
            ttft_limit_s=0.05,
            num_prompts=100,
        )
        for tp in (1, 2)
    ]
    serial = pmap(refine_layout, tasks)
    assert serial == pmap(refine_layout, tasks, backend=Backend(kind="process", workers=2))
    assert all(r.best is not None and r.above is not None for r in serial)


class _FakeRay:
    """Ray's task API as simcast uses it (init, remote, wait, get), run in this process."""

    def __init__(self):
        self.address = None

    def is_initialized(self):
        return self.address is not None

    def init(self, address=None, **_):
        self.address = address

    def remote(self, **opts):
        assert opts == {"num_cpus": 1}

        def wrap(fn):
            return types.SimpleNamespace(remote=lambda x: ("ref", fn(x)))

        return wrap

    def wait(self, refs, num_returns=1):
        return refs[:num_returns], refs[num_returns:]

    def get(self, refs):
        return [v for _, v in refs]


def test_ray_backend_submits_one_task_per_item(monkeypatch):
    fake = _FakeRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    assert pmap(powers_of_two, [4, 1, 8], backend=Backend(kind="ray", ray_address="ray://head:10001")) == [
        [1, 2, 4],
        [1],
        [1, 2, 4, 8],
    ]
    assert fake.address == "ray://head:10001"


def test_ray_missing_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(SimcastInputError, match=r"pip install 'simcast\[distributed\]'"):
        pmap(_square, [1], backend=Backend(kind="ray", ray_address="auto"))


@pytest.fixture(scope="module")
def llama8b():
    cfg = ServingConfig(
        deployment=Deployment(
            model=load_model("meta-llama/Llama-3.1-8B"),
            device=load_device("h100_sxm"),
            parallel=ParallelSpec(tp=1),
            engine="vllm",
        ),
        workload=Workload(input_length=1024, output_length=128),
        batch_size=256,
    )
    return estimate_serving(cfg)


@pytest.mark.slow
def test_refine_brackets_the_rate_meeting_p90_ttft(llama8b):
    limit_s = 0.5
    task = refine_task(
        llama8b.config,
        steady_tokens_per_s=llama8b.tokens_per_s,
        ttft_limit_s=limit_s,
        num_prompts=300,
        steady_concurrency=llama8b.concurrency,
    )
    ref = refine_layout(task)
    lo, hi = ref.best, ref.above
    assert lo is not None and hi is not None
    # the bracket invariant, re-checked by fresh runs at the two rates
    assert lo.rate_per_s < hi.rate_per_s <= lo.rate_per_s * (1 + task.rel_tol)
    again_lo, again_hi = probe(task, lo.rate_per_s), probe(task, hi.rate_per_s)
    assert again_lo.p90_ttft_s <= limit_s < again_hi.p90_ttft_s
    assert again_lo == lo and again_hi == hi  # seeded: a rerun is the same run
    # every probe is labelled by the limit it was tested against
    assert all(p.meets == (p.p90_ttft_s <= limit_s) for p in ref.probes)
    assert max(p.rate_per_s for p in ref.probes if p.meets) == lo.rate_per_s
    assert min(p.rate_per_s for p in ref.probes if not p.meets) == hi.rate_per_s


@pytest.mark.slow
def test_refine_respects_a_tpot_limit(llama8b):
    loose = refine_task(llama8b.config, steady_tokens_per_s=llama8b.tokens_per_s, ttft_limit_s=0.5, num_prompts=200)
    free = refine_layout(loose).best
    assert free is not None
    # a TPOT limit just under what the TTFT-only rate gives forces a lower rate
    tight = refine_task(
        llama8b.config,
        steady_tokens_per_s=llama8b.tokens_per_s,
        ttft_limit_s=0.5,
        tpot_limit_s=free.mean_tpot_s * 0.9,
        num_prompts=200,
    )
    got = refine_layout(tight)
    assert got.best is not None and got.best.rate_per_s < free.rate_per_s
    assert got.best.mean_tpot_s <= tight.tpot_limit_s
    assert got.above is not None and (
        got.above.mean_tpot_s > tight.tpot_limit_s or got.above.p90_ttft_s > tight.ttft_limit_s
    )


@pytest.mark.slow
def test_refine_reports_no_rate_when_the_idle_system_misses(llama8b):
    task = refine_task(llama8b.config, steady_tokens_per_s=llama8b.tokens_per_s, ttft_limit_s=1e-4, num_prompts=50)
    ref = refine_layout(task)
    assert ref.best is None and ref.above is not None and not any(p.meets for p in ref.probes)


OPT = ["optimize", "--device", DEV, "--num-devices", "2", "--input-length", "1024", "--output-length", "128"]


def _run(args, capsys):
    try:
        rc = main([str(a) for a in args])
    except SystemExit as e:  # argparse errors exit from inside parse_args
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.slow
def test_cli_refine_top_table_json_and_csv(capsys, tmp_path):
    csv = tmp_path / "pts.csv"
    args = OPT + ["--tp-sizes", "1", "2", "--ttft-limit", "100", "--refine-top", "2", "--refine-prompts", "300"]
    rc, out, err = _run(args + ["--csv", csv, "Qwen/Qwen3-0.6B"], capsys)
    assert rc == 0, err
    assert "refined req/s" in out and "p90 ttft ms" in out and "p90 TTFT <= 100 ms" in out
    rc, out, _ = _run(args + ["--json", "--workers", "1", "Qwen/Qwen3-0.6B"], capsys)
    d = json.loads(out)
    ref = d["refined"]
    assert rc == 0 and len(ref) == 2
    best = [r["parallel"] for r in d["rows"] if r["best"]]
    assert [r["parallel"] for r in ref] == best[:2]  # the table's ranking
    for r in ref:
        assert r["refined_p90_ttft_ms"] <= 100 < r["refined_miss_p90_ttft_ms"]
        assert r["refined_rate_per_s"] < r["refined_miss_rate_per_s"] and r["refined_prompts"] == 300
        assert math.isclose(
            r["steady_rate_per_s"],
            [x for x in d["rows"] if x["best"] and x["parallel"] == r["parallel"]][0]["tokens_per_s"] / 128,
        )
    import pandas as pd

    df = pd.read_csv(csv)
    top = df[df["best"]].head(2)
    assert top["refined_rate_per_s"].notna().all() and df[~df["best"]]["refined_rate_per_s"].isna().all()
    assert list(top["refined_rate_per_s"]) == pytest.approx([r["refined_rate_per_s"] for r in ref])


def test_auto_backend_estimate_skips_illegal_splits(capsys):
    """The work estimate traces nothing and must not fail on a layout the search rejects (heads % tp)."""
    args = ["optimize", "--device", DEV, "--num-devices", "64", "--input-length", "512", "--output-length", "64"]
    rc, out, err = _run(
        args + ["--tp-sizes", "3", "32", "64", "--pp-sizes", "1", "--show-rejected", "Qwen/Qwen3-0.6B"], capsys
    )
    assert rc == 3, err  # every layout rejected: exit 3
    assert "TP=32 | PP=1 | DP=2" in out and "must divide num_attention_heads=16" in out


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--refine-top", "2"], "--refine-top: got 2; needs --ttft-limit"),
        (["--ttft-limit", "300", "--refine-top", "0"], "--refine-top"),
        (["--ttft-limit", "300", "--refine-top", "65"], "--refine-top"),
        (["--refine-prompts", "100"], "--refine-prompts: got 100; only with --refine-top"),
        (["--workers", "0"], "--workers"),
        (["--ttft-limit", "300", "--refine-top", "1", "--refine-prompts", "100000"], "--refine-prompts: got 100000"),
        (["--workers", "2", "--ray", "auto"], "--workers: got 2; not used with --ray"),
    ],
)
def test_bad_sweep_flags_exit_2(capsys, extra, needle):
    rc, _, err = _run(OPT + extra + ["Qwen/Qwen3-0.6B"], capsys)
    assert rc == 2 and err.startswith("simcast: error: ") and err.count("\n") == 1, err
    assert needle in err, err


def test_ray_flag_without_ray_installed(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    rc, _, err = _run(OPT + ["--ray", "auto", "Qwen/Qwen3-0.6B"], capsys)
    assert rc == 2 and err.count("\n") == 1
    assert err.strip() == "simcast: error: --ray: got 'auto'; ray is not installed: pip install 'simcast[distributed]'"
