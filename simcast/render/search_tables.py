"""Tables, DataFrames, CSV/JSON rows for serving results and optimizer searches.

The text table is built from plain row dicts; pandas is imported only for DataFrames (``--csv``,
``--json``, ``--plot``, the Python API): importing it costs ~0.3 s, a third of a warm ``optimize``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simcast.core.assumption import Assumption
from simcast.core.specs import GIB
from simcast.render.assumption_text import assumption_lines
from simcast.render.breakdown import breakdown_line
from simcast.render.tables import table
from simcast.serving.search.layouts import Candidate, Rejection, model_label
from simcast.serving.steady.model import ServingResult

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = [
    "parallel",
    "tp",
    "pp",
    "dp",
    "batch_size",
    "concurrency",
    "ttft_ms",
    "tpot_ms",
    "tokens_per_s",
    "tokens_per_s_per_device",
    "tokens_per_s_per_user",
    "e2e_ms",
    "max_stage_weights_gib",
    "max_stage_kv_gib",
    "max_stage_mem_gib",
    "links",
    "partition",
    "engine",
    "ttft_idle_ms",
    "capped_by",
    "meets_limits",
    "best",
    "pareto",
    "prefill_breakdown",
    "decode_breakdown",
    "ep",
    "moe_tp",
    "moe_dp",
    "chunk_tokens",
    "dynamic_chunking",
]


def result_row(r: ServingResult, links: str = "") -> dict:
    """One row with the conventional column names; times in ms."""
    par, mem = r.config.parallel, r.memory
    spec = r.config.scheme
    extra = (
        {"speculative": spec.label, "spec_tokens_per_step": spec.tokens_per_step} if spec.active else {}
    )  # only with speculative decoding on: the rows without it keep their columns
    return {
        "parallel": model_label(r.config),
        "tp": par.tp,
        "pp": par.pp,
        "dp": par.dp,
        "ep": par.ep,
        "moe_tp": par.moe_tp,
        "moe_dp": par.moe_dp,
        "batch_size": r.config.batch_size,
        "concurrency": r.concurrency,
        "ttft_ms": r.ttft_s * 1e3,
        "tpot_ms": r.tpot_s * 1e3,
        "tokens_per_s": r.tokens_per_s,
        "tokens_per_s_per_device": r.tokens_per_s_per_device,
        "tokens_per_s_per_user": r.tokens_per_s_per_user,
        "e2e_ms": r.e2e_latency_s * 1e3,
        "max_stage_weights_gib": max(mem.stage_weight_bytes) / GIB,
        "max_stage_kv_gib": max(mem.stage_kv_bytes) / GIB,
        "max_stage_mem_gib": max(mem.stage_total_bytes) / GIB,
        "links": links,
        "partition": str(r.config.partition),
        "engine": r.config.runtime,
        "ttft_idle_ms": r.ttft_idle_s * 1e3,
        "capped_by": r.capped_by,
        "prefill_breakdown": breakdown_line(r.prefill),
        "decode_breakdown": breakdown_line(r.decode),
        "chunk_tokens": r.config.policy.max_num_batched_tokens,
        "dynamic_chunking": r.config.dynamic_chunks,
        **extra,
    }


def best_rows(rows: list[Candidate]) -> list[dict]:
    """Each layout's best point, ranked (the text table's rows)."""
    out = []
    for c in rows:
        row = result_row(c.result, c.links)
        row.update(meets_limits=True, best=True, pareto=False)
        out.append(row)
    return out


def to_dataframe(rows: list[Candidate]) -> pd.DataFrame:
    """Each layout's best point, ranked (the text table's rows)."""
    import pandas as pd

    return pd.DataFrame(best_rows(rows), columns=COLUMNS)


def point_rows(rows: list[Candidate], meets) -> list[dict]:
    """Every swept point of every layout (best points first, in rank order), with ``meets_limits``,
    ``best`` (the layout's chosen point) and ``pareto`` (on the frontier of the points meeting the limits)."""
    from simcast.serving.search.layouts import pareto_flags

    out = []
    for c in rows:
        for r in sorted(c.points or (c.result,), key=lambda r: (r is not c.result, r.config.batch_size)):
            row = result_row(r, c.links)
            row.update(meets_limits=bool(meets(r)), best=r is c.result, pareto=False)
            out.append(row)
    ok = [i for i, r in enumerate(out) if r["meets_limits"]]
    for i, f in zip(
        ok, pareto_flags([out[i]["tokens_per_s_per_user"] for i in ok], [out[i]["tokens_per_s_per_device"] for i in ok])
    ):
        out[i]["pareto"] = f
    return out


def points_dataframe(rows: list[Candidate], meets, extra: dict[str, dict] | None = None) -> pd.DataFrame:
    """:func:`point_rows` as a DataFrame; ``extra`` maps a layout's ``parallel`` label to columns added
    to its best row (``--refine-top``'s figures; NaN on the other rows)."""
    import pandas as pd

    pts = point_rows(rows, meets)
    cols = list(COLUMNS)
    if extra:
        cols += [k for k in next(iter(extra.values())) if k not in cols]
        for r in pts:
            if r["best"] and r["parallel"] in extra:
                r.update(extra[r["parallel"]])
    return pd.DataFrame(pts, columns=cols)


def format_search(
    rows: list[Candidate],
    rejected: list[Rejection],
    header: str,
    top: int,
    show_rejected: bool,
    assumptions: tuple[Assumption, ...],
    has_limits: bool = True,
) -> str:
    """The optimizer's table; ``has_limits`` says whether TTFT/TPOT limits were given (an empty table
    then blames the limits, else the layouts themselves)."""
    best = best_rows(rows)[:top]
    chunks = any(c.chunk_choices for c in rows[:top])  # --chunked-prefill-sizes searched the chunk setting
    out = [header, ""]
    if best:
        out += _ranked_lines(rows[:top], best, chunks)
    else:
        out.append(
            "no layout meets the limits (see --show-rejected)"
            if has_limits
            else "no legal layout: every layout was rejected (see --show-rejected)"
        )
    if rejected:
        if show_rejected:
            w = max(22, *(len(x.parallel) for x in rejected))
            out += ["", "rejected:"] + [f"  {x.parallel:<{w}} {x.reason}" for x in rejected]
        else:
            out += ["", f"{len(rejected)} layout(s) rejected (--show-rejected lists them)"]
    out += ["", "assumptions:"] + [f"  - {a}" for a in assumption_lines(assumptions)]
    return "\n".join(out)


_RANKED_HEAD = ("#", "parallel", "batch_size", "concurrency", "ttft ms", "1-prompt ttft ms")
_RANKED_TAIL = ("tpot ms", "token/s", "token/s/device", "token/s/user", "weights GiB", "KV GiB", "links")
RANKED_HEADERS = (*_RANKED_HEAD, *_RANKED_TAIL)
"""The ranked table's headers without the chunk column (the HTML report's table uses the same)."""


def ranked_cells(i: int, r: dict, chunks: bool) -> list[str]:
    """One ranked layout's cells (ms, token/s, GiB as the headers say)."""
    return [
        str(i + 1),
        r["parallel"],
        str(r["batch_size"]),
        str(r["concurrency"]),
        f"{r['ttft_ms']:.1f}",
        f"{r['ttft_idle_ms']:.1f}",
        *([f"{r['chunk_tokens']}" + (" dyn" if r["dynamic_chunking"] else "")] if chunks else []),
        f"{r['tpot_ms']:.2f}",
        f"{r['tokens_per_s']:.1f}",
        f"{r['tokens_per_s_per_device']:.1f}",
        f"{r['tokens_per_s_per_user']:.1f}",
        f"{r['max_stage_weights_gib']:.1f}",
        f"{r['max_stage_kv_gib']:.1f}",
        r["links"],
    ]


def _ranked_lines(ranked: list[Candidate], best: list[dict], chunks: bool) -> list[str]:
    """The ranked layouts' table, each one's breakdowns and (when searched) the chunk settings tried."""
    headers = [*_RANKED_HEAD, *(["chunk"] if chunks else []), *_RANKED_TAIL]
    out = [table(headers, [ranked_cells(i, r, chunks) for i, r in enumerate(best)])]
    out += ["", "breakdowns (% of op time | PP shares of step latency):"]
    w = max(22, *(len(r["parallel"]) for r in best))  # MoE labels (| EP | MoE-TP | MoE-DP) run to ~50 chars
    for i, r in enumerate(best):
        out.append(f"{i + 1:>2} {r['parallel']:<{w}} prefill: {r['prefill_breakdown']}")
        out.append(f"{'':>2} {'':<{w}} decode:  {r['decode_breakdown']}")
    if chunks:
        from simcast.serving.search.chunk_search import RULE

        out += ["", f"chunk settings tried (1-prompt ttft ms, token/s/device; {RULE}):"]
        for i, c in enumerate(ranked):
            tried = ", ".join(f"{lab}: {t * 1e3:.1f} ms, {x:.1f}" for lab, t, x in c.chunk_choices)
            out.append(f"{i + 1:>2} {best[i]['parallel']:<{w}} {tried}")
    return out


def format_serving(r: ServingResult, links: str) -> str:
    row = result_row(r, links)
    mem = r.memory
    stage_rows = [
        [str(i), f"{w / GIB:.2f}", f"{k / GIB:.2f}", f"{a / GIB:.2f}", f"{t / GIB:.2f}"]
        for i, (w, k, a, t) in enumerate(
            zip(mem.stage_weight_bytes, mem.stage_kv_bytes, mem.stage_activation_bytes, mem.stage_total_bytes)
        )
    ]
    c = r.config
    lines = [
        f"simcast serve-config: {c.model.name} on {c.parallel.world_size} x {c.device.name} ({row['parallel']}), "
        f"ISL {c.workload.input_length} / OSL {c.workload.output_length}, batch {c.batch_size} per replica, "
        f"partition {c.partition}",
        "",
        f"ttft {row['ttft_ms']:.1f} ms | tpot {row['tpot_ms']:.2f} ms | e2e {row['e2e_ms']:.0f} ms",
        f"token/s {row['tokens_per_s']:.1f} | token/s/device {row['tokens_per_s_per_device']:.1f} | "
        f"token/s/user {row['tokens_per_s_per_user']:.1f} | concurrency {row['concurrency']}",
        f"tpot = decode-only step {r.decode_cycle_s * 1e3:.2f} ms"
        + (f" per token (verify + draft step / {c.scheme.tokens_per_step:.3f} tokens)" if c.scheme.active else "")
        + f" (engine CPU {r.step_overhead_s * 1e3:.2f} ms "
        f"per microbatch step) + other prompts' chunks in the mixed steps {r.prefill_interference_s * 1e3:.2f} ms"
        f" | idle-system ttft {r.ttft_idle_s * 1e3:.1f} ms",
        f"links: {links}",
        f"prefill: {row['prefill_breakdown']}",
        f"decode:  {row['decode_breakdown']}",
        "",
        table(["stage", "weights GiB", "KV GiB", "act GiB", "total GiB"], stage_rows),
        f"memory budget {mem.budget_bytes / GIB:.2f} GiB per device: {'fits' if mem.fits else 'DOES NOT FIT'}",
        "",
        "assumptions:",
    ] + [f"  - {a}" for a in assumption_lines(r.assumptions)]
    return "\n".join(lines)
