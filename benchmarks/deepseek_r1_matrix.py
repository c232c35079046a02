"""DeepSeek-R1 expressibility matrix: the serving deployments public DeepSeek-R1 benchmarks run, as the engines'
own launch scripts and recipes write them, each run through ``simcast bench-serve`` (in-process, the CLI's
exact argument parsing) with the benchmark client's settings (``--dataset-name random --request-rate inf
--max-concurrency C --num-prompts 10C --ignore-eos``).

For each row it prints: expressible or the exact one-line error, wall time, mean TPOT / TTFT, output token/s
per GPU, and the physical bounds a prediction must respect (:mod:`deepseek_r1_bounds`), flagging a row that
breaks one. The last line is the expressible fraction.

Layouts (the rows: ``deepseek_r1_rows.py``; no benchmark figures read; sources are the engines' launch docs and
recipe configs):

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
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deepseek_r1_bounds import Bounds, bounds_for  # noqa: E402
from deepseek_r1_rows import Row, matrix  # noqa: E402


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
