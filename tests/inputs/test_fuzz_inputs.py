"""Property: random but schema-shaped inputs give a result or one SimcastInputError -- never another
exception, never a hang (issue 8, item 5).

Configs, device profiles, service YAMLs, measured CSVs, trace-cache entries and CLI values are drawn
by hypothesis from the real files with keys and values replaced by random JSON/YAML values (NaN,
infinities, huge and negative numbers, bools, strings, nested lists), raw bytes spliced in, and
flags given random strings. Runs are derandomized (the same examples every run) and each example
has a deadline plus a hard alarm.
"""

from __future__ import annotations

import copy
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from conftest import time_limit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simcast.calib.readers.measured_schema import GENERIC_COLUMNS
from simcast.cli.main import main
from simcast.core.errors import SimcastInputError
from simcast.inputs.files import load_csv, load_json, load_yaml

HERE = Path(__file__).parents[1]
DEV = str(HERE / "data" / "golden_device.yaml")
CONFIGS = {
    name: json.loads((HERE.parent / "models" / name / "config.json").read_text())
    for name in (
        "Qwen/Qwen3-0.6B",
        "meta-llama/Llama-3.2-1B",
        "mistralai/Mistral-7B-v0.3",
        "Qwen/Qwen3-30B-A3B",
        "deepseek-ai/DeepSeek-V3",
        "openai/gpt-oss-20b",
        "mistralai/Mixtral-8x7B-v0.1",
        "Qwen/Qwen3-235B-A22B-FP8",
    )
}
QWEN = CONFIGS["Qwen/Qwen3-0.6B"]
PROFILE = yaml.safe_load((HERE / "data" / "golden_device.yaml").read_text())
SERVICE = {
    "model": "Qwen/Qwen3-0.6B",
    "device": DEV,
    "runtime": "vllm",
    "workload": {"input_length": 512, "output_length": 64, "batch_size": 4, "max_batched_tokens": 2048},
    "parallel_config": {
        "world_size": 2,
        "tp_size": 2,
        "pp_size": 1,
        "dp_size": 1,
        "partition": "vllm",
        "microbatches": 1,
        "devices_per_node": 8,
    },
    "limits": {"ttft_ms": 1000.0, "tpot_ms": 50.0},
    "speculative": {"method": "eagle3", "num_speculative_tokens": 3, "acceptance": [0.8, 0.6, 0.4]},
}

# SIMCAST_FUZZ_EXAMPLES=2000 runs a longer, randomized hunt (CONTRIBUTING.md); by default the same
# 60 examples per test run every time.
N = int(os.environ.get("SIMCAST_FUZZ_EXAMPLES", "0")) or 60
FAST = settings(
    max_examples=N,
    deadline=timedelta(seconds=5),
    derandomize="SIMCAST_FUZZ_EXAMPLES" not in os.environ,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def result_or_input_error(fn, *args, **kw):
    """``fn(...)`` or None when it raised SimcastInputError; anything else propagates (fails the test)."""
    with time_limit():
        try:
            return fn(*args, **kw)
        except SimcastInputError as e:
            msg = str(e)
            assert "\n" not in msg and len(msg) < 1500, msg[:300]
            return None


# ------------------------------------------------------------------ value strategies
numbers = st.one_of(
    st.integers(-(2**70), 2**70),
    st.integers(-3, 70000),
    st.sampled_from([0, 1, 2, 8, 128]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e-300, 1e300, -0.0, 0.5]),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    numbers,
    st.text(max_size=12),
    st.sampled_from(["silu", "gelu", "bf16", "fp8", "1e400", "nan", "inf", "989.4e12", "²"]),
)
values = st.recursive(
    scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=6
)


def _leaf_paths(d, prefix=()):
    out = []
    for k, v in d.items():
        out.append(prefix + (k,))
        if isinstance(v, dict):
            out += _leaf_paths(v, prefix + (k,))
    return out


@st.composite
def mutated(draw, base: dict, extra_keys: tuple[str, ...] = ()):
    """``base`` with some keys (nested too) replaced by random values, deleted, or added."""
    d = copy.deepcopy(base)
    paths = _leaf_paths(d) + [(k,) for k in extra_keys]
    for path in draw(st.lists(st.sampled_from(paths), min_size=1, max_size=4)):
        node = d
        for k in path[:-1]:
            if not isinstance(node.get(k), dict):
                break
            node = node[k]
        else:
            old = node.get(path[-1])
            how = draw(st.sampled_from(["random", "near", "near", "delete"]))
            if how == "delete" and path[-1] in node:
                del node[path[-1]]
            elif how == "near" and isinstance(old, (int, float)) and not isinstance(old, bool):
                node[path[-1]] = type(old)(old * draw(st.sampled_from([0.9, 1.1, 0.5, 2, 10, 1e-3, 1e3, -1, 0])))
            else:
                node[path[-1]] = draw(values)
    return d


def spliced(draw, text: str) -> bytes:
    """``text`` with a random byte string inserted at a random place (encoding and syntax damage)."""
    data = text.encode()
    at = draw(st.integers(0, len(data)))
    junk = draw(
        st.one_of(
            st.binary(max_size=12),
            st.sampled_from(
                [
                    b"\xff\xfe",
                    b"&a ",
                    b"*a",
                    b"[[[[",
                    b"{",
                    b"!!python/object:os.system",
                    b"\x00",
                    b"NaN",
                    b"1e999",
                    b"- ",
                    b": ",
                    b"\n  ",
                ]
            ),
        )
    )
    return data[:at] + junk + data[at:]


# ------------------------------------------------------------------ model configs
CONFIG_KEYS = (
    "head_dim",
    "mlp_bias",
    "hidden_act",
    "num_experts",
    "num_local_experts",
    "sliding_window",
    "use_sliding_window",
    "quantization_config",
    "torch_dtype",
    "architectures",
    "model_type",
    "tie_word_embeddings",
    "attention_bias",
    "layer_types",
    "first_k_dense_replace",
    "kv_lora_rank",
)


@FAST
@given(
    cfg=st.sampled_from(sorted(CONFIGS)).flatmap(lambda n: mutated(CONFIGS[n], CONFIG_KEYS)),
    raw=st.booleans(),
    data=st.data(),
)
@pytest.mark.slow
def test_config_json(tmp_path_factory, cfg, raw, data):
    d = tmp_path_factory.mktemp("cfg")
    text = json.dumps(cfg, allow_nan=True)
    (d / "config.json").write_bytes(spliced(data.draw, text) if raw else text.encode())
    m = result_or_input_error(__import__("simcast.inputs.loaders", fromlist=["load_model"]).load_model, str(d))
    if m is not None:
        assert m.hidden_size >= 1 and m.head_dim >= 1 and m.num_layers >= 1


# ------------------------------------------------------------------ device profiles
@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
@FAST
@given(prof=mutated(PROFILE, ("calibration",)), raw=st.booleans(), data=st.data())
def test_device_profile(tmp_path_factory, prof, raw, data):
    from simcast.cost.kernels import one_kernel as kernels
    from simcast.inputs.loaders import load_device

    p = tmp_path_factory.mktemp("dev") / "dev.yaml"
    text = yaml.safe_dump(prof, allow_unicode=True)
    p.write_bytes(spliced(data.draw, text) if raw else text.encode())
    dev = result_or_input_error(load_device, str(p))
    if dev is not None:  # a profile that loads predicts a finite time
        pred = result_or_input_error(kernels.gemm, dev, 64, 64, 64, "bf16")
        assert pred is None or 0 < pred.time_s < float("inf")


# ------------------------------------------------------------------ service YAML
OVERRIDE = st.one_of(st.none(), st.integers(-2, 70000), st.integers(-(2**70), 2**70))


@FAST
@given(svc=mutated(SERVICE), raw=st.booleans(), data=st.data(), tp=OVERRIDE, batch=OVERRIDE)
def test_service_yaml(tmp_path_factory, svc, raw, data, tp, batch):
    from simcast.cli.serve_config import SERVE_CONFIG_FLAGS
    from simcast.serving.service_yaml import build_serving_config, read_service_yaml

    p = tmp_path_factory.mktemp("svc") / "svc.yaml"
    text = yaml.safe_dump(svc, allow_unicode=True)
    p.write_bytes(spliced(data.draw, text) if raw else text.encode())
    values = result_or_input_error(read_service_yaml, str(p))
    if values is not None:  # CLI overrides are range-checked by argparse; here only in-range ones arrive
        ok = lambda v: v if v is not None and 1 <= v <= 65536 else None  # noqa: E731
        result_or_input_error(
            build_serving_config, values, {"tp_size": ok(tp), "batch_size": ok(batch)}, SERVE_CONFIG_FLAGS
        )


# ------------------------------------------------------------------ engine profiles, bench-serve results
ENGINE_PROFILE = {
    "engine": "vllm",
    "step_overhead_s": 0.003,
    "per_request_overhead_s": 1e-05,
    "overhead_source": "fitted: by the fuzz test",
    "overlap_cpu": False,
    "max_num_batched_tokens": 8192,
    "max_num_seqs": 1024,
    "chunked_prefill": True,
    "decode_first": True,
    "kv_block_tokens": 16,
    "mem_fraction": 0.9,
    "mem_fraction_of": "total",
    "sources": ["vllm/engine/arg_utils.py"],
    "provenance": {"fitted": ["step_overhead_s"], "files": [{"name": "a.json", "sha256": "0" * 64}]},
}
BENCH_RESULT = {
    "model_id": "Qwen/Qwen3-0.6B",
    "num_prompts": 8,
    "request_rate": "inf",
    "burstiness": 1.0,
    "max_concurrency": 4,
    "completed": 8,
    "failed": 0,
    "total_input_tokens": 4096,
    "total_output_tokens": 256,
    "output_throughput": 800.0,
    "mean_ttft_ms": 10.0,
    "mean_tpot_ms": 4.5,
}


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
@FAST
@given(prof=mutated(ENGINE_PROFILE), raw=st.booleans(), data=st.data())
def test_engine_profile(tmp_path_factory, prof, raw, data):
    from simcast.inputs.loaders import load_device
    from simcast.serving.engine_profile import read_engine_profile

    p = tmp_path_factory.mktemp("eng") / "engine.yaml"
    text = yaml.safe_dump(prof, allow_unicode=True)
    p.write_bytes(spliced(data.draw, text) if raw else text.encode())
    pol = result_or_input_error(read_engine_profile, str(p), load_device(DEV))
    if pol is not None:  # a profile that loads gives a finite, non-negative CPU time
        assert 0 <= pol.step_cpu_s(1000) < float("inf")


@FAST
@given(run=mutated(BENCH_RESULT), raw=st.booleans(), data=st.data())
def test_bench_serve_result(tmp_path_factory, run, raw, data):
    from simcast.inputs.bench_results import read_run_file

    p = tmp_path_factory.mktemp("run") / "run.json"
    text = json.dumps(run, allow_nan=True)
    p.write_bytes(spliced(data.draw, text) if raw else text.encode())
    f = result_or_input_error(read_run_file, str(p))
    if f is not None:
        (r,) = f.runs
        assert r.input_len >= 1 and r.output_len >= 1 and r.num_requests >= 1
        assert r.tpot_s is None or r.tpot_s > 0


# ------------------------------------------------------------------ measured CSVs
COLUMNS = list(GENERIC_COLUMNS)  # the generic measured schema (simcast.calib.readers.measured_schema)
BAD_CELLS = st.sampled_from(
    ["", "abc", "inf", "-inf", "nan", "-1", "0", "1e400", "3.5", "99999999999999999999", '"a,b"', "²", "1e12"]
)
GOOD_CELLS = {
    "kind": st.sampled_from(
        [
            "gemm",
            "p2p",
            "allreduce",
            "allgather",
            "attention_decode",
            "attention_prefill",
            "rms_norm",
            "add",
            "silu_and_mul",
            "rope",
            "layer",
            "x",
        ]
    ),
    "device": st.sampled_from(["", "golden_device", "h100_sxm", "nope"]),
    "dtype": st.sampled_from(["", "bf16", "fp16", "fp8", "int3"]),
    "time_s": st.floats(1e-7, 1.0).map(repr),
    "bytes": st.floats(1.0, 1e9).map(repr),
    "nodes": st.sampled_from(["1", "2"]),
    "gpus": st.sampled_from(["2", "4", "8"]),
}


@st.composite
def csv_text(draw):
    """A generic-schema CSV: mostly plausible cells, some bad ones."""
    cols = draw(st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=8, unique=True))
    if draw(st.integers(0, 4)):
        cols = list(dict.fromkeys(["kind", "time_s", *cols]))
    cell = {c: GOOD_CELLS.get(c, st.integers(1, 4096).map(str)) for c in cols}
    rows = [
        [draw(BAD_CELLS) if draw(st.integers(0, 9)) == 0 else draw(cell[c]) for c in cols]
        for _ in range(draw(st.integers(0, 5)))
    ]
    return "\n".join([",".join(cols)] + [",".join(r) for r in rows]) + "\n"


@FAST
@given(text=csv_text(), raw=st.booleans(), data=st.data())
@pytest.mark.slow  # over ~0.6 s on 2 cores: make test runs it, make test-fast does not
def test_measured_csv_validate(tmp_path_factory, text, raw, data):
    from simcast.calib.validation.validate import error_table, predict_frame, read_measured

    p = tmp_path_factory.mktemp("csv") / "m.csv"
    p.write_bytes(spliced(data.draw, text) if raw else text.encode())
    df = result_or_input_error(read_measured, str(p))
    if df is not None:
        pred = result_or_input_error(predict_frame, df, DEV)
        if pred is not None:
            error_table(pred, ("kind",))


@pytest.mark.slow  # ~0.5 s or more: out of make test-fast
@settings(FAST, max_examples=max(N // 2, 30))
@given(text=csv_text())
def test_measured_csv_calibrate(tmp_path_factory, text, capsys):
    d = tmp_path_factory.mktemp("cal")
    (d / "m.csv").write_text(text)
    rc, err = run_cli(["calibrate", str(d / "m.csv"), "--device", DEV, "--out", str(d / "golden_device.yaml")], capsys)
    assert (d / "golden_device.yaml").exists() == (rc == 0)


# ------------------------------------------------------------------ the loaders on raw bytes
@FAST
@given(data=st.binary(max_size=200), kind=st.sampled_from(["yaml", "json", "csv"]))
def test_loaders_on_raw_bytes(tmp_path_factory, data, kind):
    p = tmp_path_factory.mktemp("raw") / f"f.{kind}"
    p.write_bytes(data)
    result_or_input_error({"yaml": load_yaml, "json": load_json, "csv": load_csv}[kind], p, "input")


# ------------------------------------------------------------------ trace-cache entries
@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_trace_cache_entries(qwen06b, tmp_path, monkeypatch):
    from simcast.core.shards import sharded_dims
    from simcast.sim.simulate import stage_key
    from simcast.trace import cache

    monkeypatch.setenv("SIMCAST_CACHE_DIR", str(tmp_path))
    key = stage_key(qwen06b, sharded_dims(qwen06b, 2), True, True, 2)
    cache.clear_memory_cache()
    fresh = cache.get_trace(key)
    (path,) = list(cache.cache_dir().glob("*.json"))
    entry = json.loads(path.read_text())

    @FAST
    @given(mutant=mutated(entry), raw=st.booleans(), data=st.data())
    def check(mutant, raw, data):
        text = json.dumps(mutant, allow_nan=True)
        path.write_bytes(spliced(data.draw, text) if raw else text.encode())
        with time_limit():
            got = cache._read_entry(path, key)  # never raises
        assert got is None or got.ops == fresh.ops

    check()
    cache.clear_memory_cache()


# trace-cache entries edited by hand, with the checksum recomputed: a checksum proves only that the entry
# was not damaged; what it holds must still make sense (issue 18 item 8: a zero dim divided by zero)
DIM_EDITS = [
    "0",
    "-1",
    "-4096",
    "T-T",
    "0*T",
    "T-1",
    "R-T",
    "1",
    "4096",
    "T",
    "R",
    "S",
    "2*T",
    "10**3",
    "99999999999999",
]


@st.composite
def op_edit(draw, entry: dict) -> dict:
    """``entry`` with one op's tensor dim, tensor shape or scalar argument replaced."""
    e = copy.deepcopy(entry)
    op = draw(st.sampled_from(e["ops"]))
    tensors = [a["t"] for a in op["args"] if "t" in a] + op["outputs"]
    what = draw(st.sampled_from(["dim", "dim", "shape", "scalar"]))
    if what == "dim" and tensors:
        t = draw(st.sampled_from(tensors))
        if t["shape"]:
            t["shape"][draw(st.integers(0, len(t["shape"]) - 1))] = draw(st.sampled_from(DIM_EDITS))
    elif what == "shape" and tensors:
        draw(st.sampled_from(tensors))["shape"] = draw(st.lists(st.sampled_from(DIM_EDITS), max_size=3))
    else:
        scalars = [a for a in op["args"] if "v" in a]
        if scalars:
            draw(st.sampled_from(scalars))["v"] = draw(st.sampled_from([0, -1, 1, 2, 7, 2**40, 2**70, None, "x"]))
    return e


@pytest.mark.slow
def test_trace_cache_entries_with_a_valid_checksum(qwen06b, tmp_path, monkeypatch):
    """An edited entry whose checksum was recomputed is rebuilt or costs a finite, non-negative step."""
    import math

    from simcast.core.specs import Batch, ParallelSpec, SimSpec
    from simcast.inputs.loaders import load_device
    from simcast.sim.simulate import simulate
    from simcast.trace import cache

    monkeypatch.setenv("SIMCAST_CACHE_DIR", str(tmp_path))
    spec = SimSpec(
        model=qwen06b,
        device=load_device(DEV),
        parallel=ParallelSpec(tp=2),
        batch=Batch.prefill(2, 64),
        num_microbatches=1,
    )
    cache.clear_memory_cache()
    simulate(spec)
    (key,) = list(cache._MEMORY)
    (path,) = list(cache.cache_dir().glob("*.json"))
    entry = json.loads(path.read_text())

    @FAST
    @given(mutant=op_edit(entry))
    def check(mutant):
        mutant["sha256"] = cache._digest({"key": mutant["key"], "ops": mutant["ops"]})
        path.write_text(json.dumps(mutant))
        with time_limit():
            got = cache._read_entry(path, key)  # never raises
        if got is not None:  # trusted: it must cost like a trace (no ZeroDivisionError, no negative time)
            cache._MEMORY[key] = got
            r = result_or_input_error(simulate, spec)
            assert r is None or (math.isfinite(r.latency_s) and r.latency_s >= 0), r.latency_s

    try:
        check()
    finally:
        cache.clear_memory_cache()


# ------------------------------------------------------------------ JSON depth scan
def _depth_reference(text: str) -> int:
    """Nesting outside strings, one character at a time (a string runs to its closing quote or the end)."""
    depth = best = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "[{":
            depth += 1
            best = max(best, depth)
        elif c in "]}":
            depth -= 1
        i += 1
    return best


@FAST
@given(text=st.text(alphabet='"\\[]{}a,\n', max_size=300))
def test_json_depth_matches_a_reference_scan(text):
    from simcast.inputs.files import json_depth

    assert json_depth(text) == _depth_reference(text)


@FAST
@given(unit=st.sampled_from(['\\"', '\\\\"', '"\\', "\\[", '"["']), n=st.integers(10_000, 100_000))
def test_json_depth_is_linear(unit, n):
    """Runs of escapes and quotes of up to ~500 KB: well under the deadline (the quadratic scan took minutes)."""
    from simcast.inputs.files import json_depth

    with time_limit(5):
        json_depth('"' + unit * n)


# ------------------------------------------------------------------ duplicate YAML keys
ASCII_VALUES = st.recursive(
    st.one_of(
        st.none(), st.booleans(), numbers, st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=8)
    ),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text("abc", max_size=3), c, max_size=3),
    max_leaves=4,
)


@FAST
@given(path=st.sampled_from(_leaf_paths(SERVICE)), value=ASCII_VALUES)
def test_duplicate_yaml_key_is_refused(tmp_path_factory, path, value):
    """Any key of the service YAML given twice (the second with any value) is one error naming it."""
    text = yaml.safe_dump(SERVICE, sort_keys=False)
    indent = "  " * (len(path) - 1)
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith(f"{indent}{path[-1]}:") and _under(lines, i, path))
    lines.insert(at, f"{indent}{path[-1]}: {json.dumps(value, allow_nan=True)}")  # before: its block stays valid
    p = tmp_path_factory.mktemp("dup") / "svc.yaml"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(SimcastInputError, match=f"duplicate key {path[-1]!r}"):
        load_yaml(p, "service YAML")


def _under(lines: list[str], i: int, path: tuple) -> bool:
    """Whether line ``i`` (the key ``path[-1]``) sits under the mapping ``path[:-1]``."""
    depth = len(path) - 1
    for j in range(i - 1, -1, -1):
        ind = (len(lines[j]) - len(lines[j].lstrip())) // 2
        if ind < depth:
            return lines[j].strip().rstrip(":") == str(path[depth - 1]) and _under(lines, j, path[:-1])
    return depth == 0


# ------------------------------------------------------------------ CLI values
def run_cli(argv, capsys):
    with time_limit():
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    err = capsys.readouterr().err
    assert rc in (0, 2, 3), err  # 3: no layout (every one rejected)
    if rc == 2:
        assert err.startswith("simcast: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return rc, err


FLAG_VALUES = st.one_of(
    st.sampled_from(
        [
            "0",
            "1",
            "2",
            "3",
            "64",
            "-1",
            "1e3",
            "nan",
            "inf",
            "²",
            "٣",
            "",
            " 7",
            "1_000",
            "99999999999999999999999",
            "0x10",
            "bf16",
            "decode",
        ]
    ),
    st.integers(-10, 10**13).map(str),
    st.text(max_size=6),
)
KERNEL_FLAGS = {
    "gemm": ["--m", "--n", "--k", "--dtype"],
    "attention": ["--phase", "--batch", "--q-len", "--kv-len", "--heads", "--kv-heads", "--head-dim", "--dtype"],
    "allreduce": ["--bytes", "--gpus", "--nodes"],
    "allgather": ["--bytes", "--gpus", "--nodes"],
    "p2p": ["--bytes"],
}
KERNEL_DEFAULTS = {
    "--m": "64",
    "--n": "64",
    "--k": "64",
    "--phase": "decode",
    "--kv-len": "128",
    "--heads": "8",
    "--kv-heads": "8",
    "--bytes": "1e6",
    "--gpus": "8",
}


@st.composite
def kernel_argv(draw):
    name = draw(st.sampled_from(sorted(KERNEL_FLAGS)))
    flags = {f: KERNEL_DEFAULTS[f] for f in KERNEL_FLAGS[name] if f in KERNEL_DEFAULTS}
    for f in draw(st.lists(st.sampled_from(KERNEL_FLAGS[name]), min_size=1, max_size=3)):
        flags[f] = draw(FLAG_VALUES)
    return ["kernel", name, "--device", DEV] + [x for kv in flags.items() for x in kv]


@pytest.mark.slow  # ~1 s or more: out of make test-fast
@FAST
@given(argv=kernel_argv())
def test_cli_kernel_values(argv, capsys):
    run_cli(argv, capsys)


SIM_VALUES = {
    "--tp": st.sampled_from(["1", "2", "3", "0", "10000000", "x"]),
    "--pp": st.sampled_from(["1", "2", "3", "29", "0", "²"]),
    "--batch": FLAG_VALUES,
    "--input-length": FLAG_VALUES,
    "--context-length": FLAG_VALUES,
    "--microbatches": FLAG_VALUES,
    "--num-devices": st.sampled_from(["1", "2", "4", "6", "0", "70000"]),
    "--phase": st.sampled_from(["prefill", "decode", "x"]),
    "--partition": st.sampled_from(
        ["vllm", "uniform", "14,14", "0,28", "x", "1,2,3", "9" * 30 + ",1", "١٤,١٤", "1_4,14", "１４,１４", "balanced"]
    ),
    "--devices-per-node": st.sampled_from(["1", "8", "0", "2000"]),
}


@settings(FAST, max_examples=max(N // 2, 30), deadline=timedelta(seconds=20))
@given(
    flags=st.dictionaries(st.sampled_from(sorted(SIM_VALUES)), st.just(None), min_size=1, max_size=4), data=st.data()
)
def test_cli_simulate_values(flags, data, capsys):
    argv = ["simulate", "--model", "Qwen/Qwen3-0.6B", "--device", DEV, "--input-length", "64"]
    for f in flags:
        argv += [f, data.draw(SIM_VALUES[f])]
    run_cli(argv, capsys)


@FAST
@given(
    sizes=st.lists(FLAG_VALUES, max_size=4),
    which=st.sampled_from(["--tp-sizes", "--pp-sizes", "--batch-sizes"]),
    n=st.sampled_from(["1", "8", "0", "70000", "x"]),
)
def test_cli_optimize_list_values(sizes, which, n, capsys, monkeypatch):
    """Parsing and checking of the optimizer's lists (the search itself is replaced: it is not under test)."""
    import simcast.serving.search.layouts as search

    monkeypatch.setattr(search, "search", lambda *a, **k: ([], []))
    run_cli(
        [
            "optimize",
            "--device",
            DEV,
            "--num-devices",
            n,
            "--input-length",
            "64",
            "--output-length",
            "8",
            which,
            *sizes,
            "Qwen/Qwen3-0.6B",
        ],
        capsys,
    )


@pytest.mark.parametrize(
    "text",
    [
        "[" * 64 + "]" * 64,  # at the depth bound: accepted
        '{"a": ' * 64 + "1" + "}" * 64,
    ],
)
def test_json_depth_bound_is_exact(tmp_path, text):
    p = tmp_path / "x.json"
    p.write_text(text)
    assert load_json(p, "x") is not None
    p.write_text("[" + text + "]")
    with pytest.raises(SimcastInputError, match="nests 65 levels"):
        load_json(p, "x")
