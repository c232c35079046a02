"""DeepSeek-R1 expressibility matrix: the serving deployments public DeepSeek-R1 benchmarks run, as the engines'
own launch scripts and recipes write them, each run through ``simcast bench-serve`` (in-process, the CLI's
exact argument parsing) with the benchmark client's settings (``--dataset-name random --request-rate inf
--max-concurrency C --num-prompts 10C --ignore-eos``).

For each row it prints: expressible or the exact one-line error, wall time, mean TPOT / TTFT, output token/s
per GPU, and the physical bounds a prediction must respect (:mod:`deepseek_r1_bounds`), flagging a row that
breaks one. The last line is the expressible fraction.

Layouts (no benchmark figures read; sources are the engines' launch docs and recipe configs):

* SGLang: ``--tp 8`` (docs ``basic_usage/deepseek``: one 8-GPU node, ``--tp 16 --nnodes 2`` on H100); attention
  DP ``--tp 8 --dp 8 --enable-dp-attention`` with ``--ep-size 8`` / ``--moe-a2a-backend deepep``; MTP
  ``--speculative-algorithm EAGLE --speculative-num-steps 3 --speculative-eagle-topk 1
  --speculative-num-draft-tokens 4`` (NEXTN is SGLang's alias for the model's own MTP layer).
* TensorRT-LLM: ``tensor_parallel_size 8``, ``moe_expert_parallel_size 8``, ``enable_attention_dp``;
  ``speculative_config: {decoding_type: MTP, num_nextn_predict_layers: 3}``.
* Dynamo recipes (ai-dynamo/dynamo ``recipes/deepseek-r1``): ``trtllm/disagg/wide_ep/gb200/deploy.yaml``
  (1 prefill worker DEP4 = TP4 + EP4 + attention DP, 1 decode worker DEP32); ``sglang-wideep/
  tep16p-dep16d-disagg.yaml`` (prefill TP16 + EP16, decode TP16 + DP16 attention + EP16);
  ``vllm/disagg/deploy_gb200_2prefill_dep4_1decode_dep8.yaml`` and ``deploy_hopper_prefill_dep16_decode_dep16``.
* vLLM: ``-tp 8``; ``--data-parallel-size 8 --enable-expert-parallel``.
* ATOM (ROCm/ATOM README): ``-tp 8 --kv_cache_dtype fp8``, MTP ``--method mtp --num-speculative-tokens 3``.

Spelling: attention DP is written as simcast spells it today, attention TP per DP rank: SGLang's ``--tp-size 8
--dp-size 8 --enable-dp-attention`` is ``--tp 1 --dp 8 --dp-attention`` (a native ``--tp-size``/``--dp-size``
spelling, with SGLang's meaning, is another helper's work; where it lands, the ``NATIVE`` note of a row says
what it would be). Dynamo rows run ``--engine dynamo-<backend>`` (its workers run that engine).

Run: ``python benchmarks/deepseek_r1_matrix.py`` (25 rows, < ~10 min), ``--quick`` (a few rows, ~2 min),
``--full`` (every row), ``--filter TEXT`` (rows whose id contains TEXT).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deepseek_r1_bounds import Bounds, bounds_for  # noqa: E402

FP8 = "deepseek-ai/DeepSeek-R1-0528"
NVFP4 = "nvidia/DeepSeek-R1-0528-FP4"
MXFP4 = "amd/DeepSeek-R1-0528-MXFP4"

SGLANG_MTP = (
    "--speculative-algorithm NEXTN --speculative-num-steps {k} --speculative-eagle-topk 1 "
    "--speculative-num-draft-tokens {k1}"
)
"""SGLang's MTP flags for a chain of k drafts (k + 1 tokens verified)."""
VLLM_MTP = '{{"method":"mtp","num_speculative_tokens":{k}}}'
"""vLLM's --speculative-config JSON; TensorRT-LLM's ``decoding_type: MTP, num_nextn_predict_layers: 3`` and
ATOM's ``--method mtp --num-speculative-tokens 3`` mean the same and are written with it."""


@dataclass(frozen=True, kw_only=True)
class Row:
    """One deployment and client setting: ``layout`` the simcast flags of the layout (agg) or of the run
    (disagg, with ``prefill``/``decode`` layouts and worker counts); ``native`` how the engine spells it."""

    id: str
    device: str
    engine: str
    model: str
    layout: str
    isl: int = 1024
    osl: int = 1024
    conc: int = 64
    mtp: int = 0
    prefill: str = ""
    decode: str = ""
    workers: tuple[int, int] = (1, 1)
    range_meaning: str = ""
    native: str = ""
    extra: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def disagg(self) -> bool:
        return bool(self.decode)

    def argv(self) -> list[str]:
        """The ``simcast bench-serve`` arguments of this row."""
        a = ["bench-serve", "--model", self.model, "--device", self.device, "--engine", self.engine]
        a += self.layout.split()
        if self.disagg:
            a += ["--serving-mode", "disagg", "--prefill-workers", str(self.workers[0])]
            a += ["--decode-workers", str(self.workers[1]), "--prefill-layout", self.prefill]
            a += ["--decode-layout", self.decode]
        if self.mtp and "sglang" in self.engine:
            a += SGLANG_MTP.format(k=self.mtp, k1=self.mtp + 1).split()
        elif self.mtp:
            a += ["--speculative-config", VLLM_MTP.format(k=self.mtp)]
        a += ["--dataset-name", "random", "--random-input-len", str(self.isl), "--random-output-len", str(self.osl)]
        a += ["--request-rate", "inf", "--max-concurrency", str(self.conc), "--num-prompts", str(10 * self.conc)]
        a += ["--ignore-eos"]
        if self.range_meaning:
            a += ["--random-range-ratio", "0.8", "--random-range-ratio-meaning", self.range_meaning]
        return a + self.extra.split()

    def gpus(self) -> int:
        """GPUs of the deployment: the layout's world size, or P prefill + D decode workers' GPUs."""
        if not self.disagg:
            return _world(_flags(self.layout))
        return self.workers[0] * _world(_kv(self.prefill)) + self.workers[1] * _world(_kv(self.decode))

    def decode_layout(self) -> dict[str, str]:
        """The decode engine's layout keys (tp, dp, ep; dp_attention when the dp ranks are attention-DP)."""
        kv = _kv(self.decode) if self.disagg else _flags(self.layout)
        if kv.get("enable_expert_parallel") == "true":
            kv["dp_attention"] = "true"
        return kv


def _flags(layout: str) -> dict[str, str]:
    """``--tp 1 --dp 8 --dp-attention`` -> {tp: 1, dp: 8, dp_attention: true}."""
    toks, out = layout.split(), {}
    for i, t in enumerate(toks):
        if t in ("--tp", "--dp", "--ep", "--pp"):
            out[t[2:]] = toks[i + 1]
        elif t in ("--dp-attention", "--enable-expert-parallel"):
            out[t[2:].replace("-", "_")] = "true"
    return out


def _kv(text: str) -> dict[str, str]:
    """``tp=1,dp=8`` (or ``tp,1,dp,8``) -> a dict."""
    if "=" in text:
        return dict(p.split("=", 1) for p in text.split(",") if p)
    parts = [p for p in text.split(",") if p]
    return dict(zip(parts[::2], parts[1::2]))


def _world(kv: dict[str, str]) -> int:
    return int(kv.get("tp", 1)) * int(kv.get("dp", 1)) * int(kv.get("pp", 1))


def _agg_rows() -> list[Row]:
    """Single-node (and H100's two-node) aggregated deployments."""
    rows: list[Row] = []
    tp8 = "--tp 8"
    dep8 = "--tp 1 --dp 8 --dp-attention --ep 8"
    dep8_native = "SGLang --tp-size 8 --dp-size 8 --enable-dp-attention --ep-size 8"
    for dev in ("h200", "b200", "b300", "mi300x", "mi325x", "mi355x"):
        rows.append(Row(id=f"{dev}-sglang-fp8-tp8", device=dev, engine="sglang", model=FP8, layout=tp8))
        rows.append(Row(id=f"{dev}-sglang-fp8-tp8-mtp", device=dev, engine="sglang", model=FP8, layout=tp8, mtp=3))
    rows.append(Row(id="h100-sglang-fp8-tp16", device="h100", engine="sglang", model=FP8, layout="--tp 16"))
    for dev in ("h200", "b200", "b300"):
        rows.append(
            Row(id=f"{dev}-sglang-fp8-dep8", device=dev, engine="sglang", model=FP8, layout=dep8, native=dep8_native)
        )
        rows.append(Row(id=f"{dev}-trtllm-fp8-tp8-ep8", device=dev, engine="trtllm", model=FP8, layout="--tp 8 --ep 8"))
        rows.append(Row(id=f"{dev}-trtllm-fp8-dep8-mtp", device=dev, engine="trtllm", model=FP8, layout=dep8, mtp=3))
        rows.append(Row(id=f"{dev}-vllm-fp8-tp8", device=dev, engine="vllm", model=FP8, layout=tp8))
        rows.append(
            Row(
                id=f"{dev}-vllm-fp8-dp8-ep",
                device=dev,
                engine="vllm",
                model=FP8,
                layout="--tp 1 --dp 8 --enable-expert-parallel",
            )
        )
    for dev in ("b200", "b300"):
        for eng in ("sglang", "trtllm"):
            rows.append(Row(id=f"{dev}-{eng}-fp4-tp8", device=dev, engine=eng, model=NVFP4, layout=tp8))
            rows.append(Row(id=f"{dev}-{eng}-fp4-tp8-mtp", device=dev, engine=eng, model=NVFP4, layout=tp8, mtp=3))
        rows.append(Row(id=f"{dev}-trtllm-fp4-dep8", device=dev, engine="trtllm", model=NVFP4, layout=dep8))
    for dev in ("gb200", "gb300"):
        rows.append(Row(id=f"{dev}-trtllm-fp4-tp4", device=dev, engine="trtllm", model=NVFP4, layout="--tp 4"))
    for dev in ("mi300x", "mi325x", "mi355x"):
        rows.append(Row(id=f"{dev}-atom-fp8-tp8", device=dev, engine="atom", model=FP8, layout=tp8))
        rows.append(Row(id=f"{dev}-vllm-fp8-tp8", device=dev, engine="vllm", model=FP8, layout=tp8))
    rows.append(Row(id="mi355x-atom-fp4-tp8", device="mi355x", engine="atom", model=MXFP4, layout=tp8))
    rows.append(Row(id="mi355x-atom-fp4-tp8-mtp", device="mi355x", engine="atom", model=MXFP4, layout=tp8, mtp=3))
    rows.append(Row(id="mi355x-sglang-fp4-tp8", device="mi355x", engine="sglang", model=MXFP4, layout=tp8))
    return rows


def _disagg_rows() -> list[Row]:
    """Multi-node disaggregated deployments (Dynamo recipes, SGLang PD, TensorRT-LLM disaggregated)."""
    dep = "tp=1,dp={n},dp_attention=true,ep={n}"
    rows: list[Row] = []
    for dev in ("gb200", "gb300"):
        for mtp in (0, 3):
            sfx = "-mtp" if mtp else ""
            rows.append(
                Row(
                    id=f"{dev}-dynamo-trtllm-fp4-1p-dep4-1d-dep32{sfx}",
                    device=dev,
                    engine="dynamo-trtllm",
                    model=NVFP4,
                    layout="--kv-cache-dtype fp8",
                    prefill=dep.format(n=4),
                    decode=dep.format(n=32),
                    mtp=mtp,
                    native="TensorRT-LLM extra-engine-args: tensor_parallel_size 4/32, moe_expert_parallel_size "
                    "4/32, enable_attention_dp true",
                )
            )
            rows.append(
                Row(
                    id=f"{dev}-dynamo-trtllm-fp4-4p-dep4-1d-dep8{sfx}",
                    device=dev,
                    engine="dynamo-trtllm",
                    model=NVFP4,
                    layout="--kv-cache-dtype fp8",
                    prefill=dep.format(n=4),
                    decode=dep.format(n=8),
                    workers=(4, 1),
                    mtp=mtp,
                )
            )
        rows.append(
            Row(
                id=f"{dev}-dynamo-sglang-fp8-2p-dep8-1d-dep48",
                device=dev,
                engine="dynamo-sglang",
                model=FP8,
                layout="--moe-a2a-backend deepep",
                prefill=dep.format(n=8),
                decode=dep.format(n=48),
                workers=(2, 1),
                native="SGLang --tp-size 48 --dp-size 48 --enable-dp-attention --ep-size 48 --moe-a2a-backend deepep",
            )
        )
    for dev in ("h100", "h200"):
        rows.append(
            Row(
                id=f"{dev}-dynamo-sglang-fp8-1p-tep16-1d-dep16",
                device=dev,
                engine="dynamo-sglang",
                model=FP8,
                layout="--moe-a2a-backend deepep",
                prefill="tp=16,ep=16",
                decode=dep.format(n=16),
                native="recipes/deepseek-r1/sglang-wideep/tep16p-dep16d-disagg.yaml",
            )
        )
        rows.append(
            Row(
                id=f"{dev}-dynamo-vllm-fp8-1p-dep16-1d-dep16",
                device=dev,
                engine="dynamo-vllm",
                model=FP8,
                layout="",
                prefill="tp=1,dp=16,enable_expert_parallel=true",
                decode="tp=1,dp=16,enable_expert_parallel=true",
            )
        )
    for dev in ("b200", "b300", "h200"):
        for mtp in (0, 3):
            rows.append(
                Row(
                    id=f"{dev}-sglang-fp8-1p-tp8-1d-dep8" + ("-mtp" if mtp else ""),
                    device=dev,
                    engine="sglang",
                    model=FP8,
                    layout="",
                    prefill="tp=8",
                    decode=dep.format(n=8),
                    mtp=mtp,
                )
            )
    rows.append(
        Row(
            id="gb200-dynamo-vllm-fp4-2p-dep4-1d-dep8",
            device="gb200",
            engine="dynamo-vllm",
            model=NVFP4,
            layout="",
            prefill="tp=1,dp=4,enable_expert_parallel=true",
            decode="tp=1,dp=8,enable_expert_parallel=true",
            workers=(2, 1),
        )
    )
    rows.append(
        Row(
            id="mi355x-sglang-fp8-1p-tp8-1d-tp8",
            device="mi355x",
            engine="sglang",
            model=FP8,
            layout="",
            prefill="tp=8",
            decode="tp=8",
        )
    )
    return rows


def _with_client(rows: list[Row], settings: list[tuple[int, int, int, str]]) -> list[Row]:
    """Each row under each client setting (ISL, OSL, concurrency, range meaning)."""
    from dataclasses import replace

    out = []
    for r in rows:
        for isl, osl, conc, rm in settings:
            tag = f"-{isl // 1024}k{osl // 1024}k-c{conc}" + ("-rr08" if rm else "")
            out.append(replace(r, id=r.id + tag, isl=isl, osl=osl, conc=conc, range_meaning=rm))
    return out


def matrix(kind: str) -> list[Row]:
    """``quick``: one row per engine family; ``default``: :data:`DEFAULT_ROWS` at 1k/1k; ``full``: the cross product
    with 1k/1k, 1k/8k, 8k/1k at several concurrencies and the lower-bound range meaning."""
    base = _agg_rows() + _disagg_rows()
    if kind == "full":
        settings = [(1024, 1024, c, "") for c in (4, 64, 256)]
        settings += [(1024, 8192, 64, ""), (8192, 1024, 64, ""), (1024, 1024, 64, "lower-bound")]
        return _with_client(base, settings)
    if kind == "quick":
        keep = (
            "h200-sglang-fp8-tp8-mtp",
            "b200-trtllm-fp8-dep8-mtp",
            "mi355x-atom-fp4-tp8",
            "gb200-dynamo-trtllm-fp4-1p-dep4-1d-dep32-mtp",
            "h200-dynamo-sglang-fp8-1p-tep16-1d-dep16",
            "b300-sglang-fp4-tp8",
        )
        return _with_client([r for r in base if r.id in keep], [(1024, 1024, 32, "lower-bound")])
    return _with_client([r for r in base if r.id in DEFAULT_ROWS], [(1024, 1024, 32, "")])


DEFAULT_ROWS = (
    "h200-sglang-fp8-tp8",
    "b200-sglang-fp8-tp8-mtp",
    "mi300x-sglang-fp8-tp8",
    "mi325x-sglang-fp8-tp8-mtp",
    "h100-sglang-fp8-tp16",
    "h200-trtllm-fp8-dep8-mtp",
    "b200-sglang-fp8-dep8",
    "b200-vllm-fp8-tp8",
    "b300-trtllm-fp8-tp8-ep8",
    "b200-trtllm-fp4-tp8",
    "b300-sglang-fp4-tp8",
    "b300-trtllm-fp4-tp8-mtp",
    "gb300-trtllm-fp4-tp4",
    "mi325x-atom-fp8-tp8",
    "mi355x-vllm-fp8-tp8",
    "mi355x-sglang-fp4-tp8",
    "mi355x-atom-fp4-tp8-mtp",
    "gb200-dynamo-trtllm-fp4-1p-dep4-1d-dep32-mtp",
    "gb200-dynamo-trtllm-fp4-4p-dep4-1d-dep8-mtp",
    "gb300-dynamo-trtllm-fp4-4p-dep4-1d-dep8",
    "b200-sglang-fp8-1p-tp8-1d-dep8",
    "b300-sglang-fp8-1p-tp8-1d-dep8-mtp",
    "gb200-dynamo-vllm-fp4-2p-dep4-1d-dep8",
    "h100-dynamo-vllm-fp8-1p-dep16-1d-dep16",
    "mi355x-sglang-fp8-1p-tp8-1d-tp8",
)
"""The default run: every device, engine and serving mode at least once, the slowest-to-simulate layouts (the
DEP32/DEP48 decode pools without MTP, TEP16 prefill) left to ``--full`` (and ``--quick`` keeps one TEP16 row)."""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    row: Row
    error: str
    wall_s: float
    tpot_ms: float = 0.0
    ttft_ms: float = 0.0
    tok_s_gpu: float = 0.0
    bounds: Bounds | None = None


def run(row: Row) -> Outcome:
    """``simcast bench-serve`` on the row, in-process; the metrics from its ``--save-result`` JSON."""
    from simcast.cli.main import main

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        err = io.StringIO()
        t = time.perf_counter()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                rc = main([*row.argv(), "--save-result", str(out)])
        except SystemExit as e:  # argparse's own errors
            rc = int(e.code or 0)
        wall = time.perf_counter() - t
        if rc != 0 or not out.is_file():
            lines = [ln for ln in err.getvalue().splitlines() if "error" in ln] or err.getvalue().splitlines()
            return Outcome(row=row, error=(lines[-1] if lines else f"exit {rc}"), wall_s=wall)
        d = json.loads(out.read_text())
    tok_gpu = d["output_throughput"] / row.gpus()
    b = bounds_for(row, d)
    return Outcome(
        row=row,
        error="",
        wall_s=wall,
        tpot_ms=d["mean_tpot_ms"],
        ttft_ms=d["mean_ttft_ms"],
        tok_s_gpu=tok_gpu,
        bounds=b,
    )


def report_line(o: Outcome) -> str:
    """One printed line per row."""
    r = o.row
    if o.error:
        return f"{r.id:58s} INEXPRESSIBLE ({o.wall_s:5.1f} s): {o.error}"
    b = o.bounds
    assert b is not None
    flags = b.violations(tpot_ms=o.tpot_ms, tok_s_gpu=o.tok_s_gpu)
    return (
        f"{r.id:58s} ok {o.wall_s:5.1f} s  TPOT {o.tpot_ms:7.2f} ms (floor {b.tpot_floor_ms:5.2f})  TTFT "
        f"{o.ttft_ms:8.1f} ms  {o.tok_s_gpu:8.1f} tok/s/GPU (HBM bound {b.hbm_tok_s_gpu:9.0f}, compute bound "
        f"{b.compute_tok_s_gpu:8.0f}) on {r.gpus()} GPUs" + (f"  IMPLAUSIBLE: {'; '.join(flags)}" if flags else "")
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="a few rows (~2 min)")
    g.add_argument("--full", action="store_true", help="every layout x client setting (long)")
    p.add_argument("--filter", default="", help="only rows whose id contains this")
    p.add_argument("--list", action="store_true", help="print the rows' commands, run nothing")
    a = p.parse_args(argv)
    rows = [r for r in matrix("quick" if a.quick else "full" if a.full else "default") if a.filter in r.id]
    if a.list:
        for r in rows:
            print(f"{r.id}: simcast {' '.join(r.argv())}" + (f"   [native: {r.native}]" if r.native else ""))
        return 0
    outcomes = []
    t0 = time.perf_counter()
    for r in rows:
        o = run(r)
        outcomes.append(o)
        print(report_line(o), flush=True)
    ok = [o for o in outcomes if not o.error]
    bad = [o for o in ok if o.bounds is not None and o.bounds.violations(tpot_ms=o.tpot_ms, tok_s_gpu=o.tok_s_gpu)]
    print(
        f"expressible: {len(ok)}/{len(outcomes)} = {len(ok) / max(1, len(outcomes)):.0%}; physically implausible: "
        f"{len(bad)}; wall {time.perf_counter() - t0:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
