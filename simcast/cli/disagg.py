"""``optimize --serving-mode agg|disagg|both`` and ``optimize --request-rate`` (edge module)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simcast.api.options import Flag, opt
from simcast.cli.exits import EXIT_NO_LAYOUT
from simcast.cli.option_flags import add_option_flags
from simcast.cli.outputs import emit, emit_json
from simcast.core.errors import require
from simcast.serving.config import SERVING_MODES, ServingConfig
from simcast.serving.disagg.kv_transfer import KV_TRANSFER_MODES

if TYPE_CHECKING:
    from simcast.serving.disagg.pool_memory import PoolFit
    from simcast.serving.disagg.requests import DisaggBench
    from simcast.serving.disagg.steady import DisaggConfig, DisaggResult
    from simcast.serving.search.layouts import SearchSpace


@dataclass(frozen=True, kw_only=True)
class DisaggFlags:
    """``optimize``'s serving modes and its fewest-devices search at a request rate."""

    serving_mode: str = opt(
        "agg",
        "agg, disagg or both",
        flag=Flag(
            names=("--serving-mode",),
            help="agg: prefill and decode in one engine; disagg: separate prefill and decode pools (xPyD) joined "
            "by a KV transfer; both: search both and say which wins and why [agg]",
            choices=SERVING_MODES,
        ),
    )
    kv_transfer: str = opt(
        "whole",
        "disagg: when the prompt's KV moves",
        flag=Flag(
            names=("--kv-transfer",),
            help="disagg: the prompt's KV moves after the prefill (whole: vLLM's NixlConnector) or streams layer "
            "by layer during it (per-layer) [whole]",
            choices=KV_TRANSFER_MODES,
        ),
    )
    request_rate: float | None = opt(
        None,
        "requests/s the fewest devices must sustain (None: rank by token/s)",
        flag=Flag(
            names=("--request-rate",),
            help="return the fewest devices (<= --num-devices), layout and serving mode that sustain this many "
            "requests/s under the limits [<= 1e9]",
            value_type="search_rate",
        ),
    )
    min_tokens_per_user: float | None = opt(
        None,
        "disagg: output token/s per user (1 / TPOT) the ranked deployments must reach (None: none)",
        flag=Flag(
            names=("--min-tokens-per-user",),
            help="disagg: rank each layout pair by token/s/GPU among its deployments giving each user at least "
            "this many output token/s (1 / TPOT; MTP's tokens per step included); the Pareto front is printed "
            "whole [none; <= 1e6]",
            value_type="user_rate",
        ),
    )
    replay_top: int = opt(
        1,
        "disagg: best deployments replayed closed loop by the request-level simulator (0: none)",
        flag=Flag(
            names=("--replay-top",),
            help="disagg: replay the best K deployments request by request, closed loop at their decode "
            "concurrency (--request-rate inf --max-concurrency C, 3 x C prompts), next to their steady-state "
            "figures [1; 0: none]",
            value_type="replay_top",
            metavar="K",
        ),
    )


def add_disagg_args(p: argparse.ArgumentParser) -> None:
    add_option_flags(
        p, DisaggFlags, ("serving_mode", "kv_transfer", "request_rate", "min_tokens_per_user", "replay_top")
    )


def check_disagg_args(a: argparse.Namespace) -> None:
    require(
        a.emit != "dynamo" or a.serving_mode != "agg",
        "--emit",
        a.emit,
        "dynamo launches disaggregated pools: use it with --serving-mode disagg or both",
    )
    require(
        a.min_tokens_per_user is None or a.serving_mode != "agg",
        "--min-tokens-per-user",
        a.min_tokens_per_user,
        "ranks disaggregated deployments: use it with --serving-mode disagg or both",
    )


def wanted(a: argparse.Namespace) -> bool:
    """True when the optimize run needs this module (another mode than agg, or a request rate)."""
    return a.serving_mode != "agg" or a.request_rate is not None


def cmd_optimize_modes(a: argparse.Namespace, base: ServingConfig, space: SearchSpace) -> int:
    from simcast.render.disagg_tables import NULL_DISAGG
    from simcast.serving.disagg.search import evaluate_pools, search_deployments
    from simcast.serving.search.layouts import search

    check_disagg_args(a)
    cache = a.use_cache
    agg_rows: list = []
    agg_rej: list = []
    if a.serving_mode in ("agg", "both"):
        agg_rows, agg_rej = search(base, space, use_disk_cache=cache, workers=a.workers, ray_address=a.ray_address)
    pools = evaluate_pools(base, space, cache) if a.serving_mode in ("disagg", "both") else []
    dsearch = search_deployments(pools, space, a.kv_transfer, a.min_tokens_per_user or 0.0) if pools else None
    dis_rows, dis_rej = (dsearch.rows, dsearch.rejected) if dsearch else ([], [])
    out: dict = {"serving_mode": a.serving_mode}
    lines: list[str] = []
    w = base.workload
    head = (
        f"simcast optimize --serving-mode {a.serving_mode}: {base.model.name} on up to {space.num_devices} x "
        f"{base.device.name}, ISL {w.input_length} / OSL {w.output_length}"
    )
    found = True
    if a.request_rate is not None:
        found = _fewest_devices(a, space, (base, agg_rows, agg_rej), pools, head, lines, out)
    else:
        _ranked(a, space, agg_rows, agg_rej, (dis_rows, dis_rej, dsearch), pools, head, lines, out)
        found = bool(agg_rows or dis_rows)  # nothing meets the limits: exit 3, as the aggregated search
    if a.json:
        emit_json(out, null_reason=NULL_DISAGG)
    else:
        emit("\n".join(lines))
    return 0 if found else EXIT_NO_LAYOUT


def _fewest_devices(
    a: argparse.Namespace,
    space: SearchSpace,
    agg: tuple[ServingConfig, list, list],
    pools: list,
    head: str,
    lines: list[str],
    out: dict,
) -> bool:
    """``--request-rate``: the fewest devices each mode needs to sustain it (``lines`` and ``out`` filled);
    False when no mode sustains it within ``--num-devices`` (the best rate reached and why are printed)."""
    from simcast.render.assumption_text import assumption_lines
    from simcast.render.disagg_tables import disagg_row
    from simcast.render.search_tables import result_row
    from simcast.serving.disagg.search import fewest_disagg

    rate = a.request_rate
    fa = _fewest_agg(a, space, agg, rate) if a.serving_mode != "disagg" else None
    fd = fewest_disagg(pools, space, rate, a.kv_transfer) if pools else None
    lines.append(f"{head}: fewest devices sustaining {rate:g} requests/s under the limits")
    if fa is not None and fa.sustained and fa.best is not None:
        c, n = fa.best.candidate, fa.devices
        par = c.result.config.parallel
        unit = "attention-DP engines" if fa.best.group_devices > par.tp * par.pp else "replicas"
        lines.append(
            f"  agg:    {n} devices, {fa.best.group_devices}-device "
            f"{unit} "
            f"of {result_row(c.result)['parallel']} (per replica as ranked at {c.result.config.parallel.world_size} "
            f"devices: ttft {c.result.ttft_s * 1e3:.1f} ms, tpot {c.result.tpot_s * 1e3:.2f} ms)"
        )
        out["agg"] = {"devices": n, **result_row(c.result)}
        _agg_at_rate(a, fa, lines, out["agg"])
    elif fa is not None:
        from simcast.serving.search.fewest import why_not

        lines.append(f"  agg:    no layout sustains it within {space.num_devices} devices")
        lines.append(f"          why: {why_not(fa)}")
        out["agg"] = {"devices": None, "best_rate_per_s": fa.reached_per_s, "why": why_not(fa)}
        if fa.best is not None:
            c = fa.best.candidate
            lines.append(
                f"          best rate reached: {fa.reached_per_s:.3g} requests/s by {result_row(c.result)['parallel']} "
                f"(ttft {c.result.ttft_s * 1e3:.1f} ms, tpot {c.result.tpot_s * 1e3:.2f} ms); "
                f"{rate:g} requests/s needs {fa.devices} devices"
            )
            out["agg"].update(devices_needed=fa.devices, **result_row(c.result))
            _agg_at_rate(a, fa, lines, out["agg"])
    fa_n = fa.devices if fa is not None and fa.sustained else None
    if fd:
        c2 = fd.config
        lines.append(
            f"  disagg: {fd.num_devices} devices, {c2.label}: prefill {disagg_row(fd)['prefill_parallel']}, "
            f"decode {disagg_row(fd)['decode_parallel']} (ttft {fd.ttft_s * 1e3:.1f} ms, tpot "
            f"{fd.tpot_s * 1e3:.2f} ms, prefill utilisation {fd.prefill_utilisation:.2f})"
        )
        out["disagg"] = disagg_row(fd)
    elif a.serving_mode != "agg":
        lines.append(f"  disagg: no deployment sustains it within {space.num_devices} devices")
    counts = ([(fa_n, "agg")] if fa_n else []) + ([(fd.num_devices, "disagg")] if fd else [])
    if counts:
        n, mode = min(counts)
        if len(counts) == 2 and counts[0][0] == counts[1][0]:
            mode = "both"  # a tie: either mode needs that many devices
        lines.append(f"fewest: {n} devices ({'agg and disagg tie' if mode == 'both' else mode})")
        out["fewest"] = {"devices": n, "serving_mode": mode}
    if fd:
        lines += ["", "assumptions (disagg):"] + [f"  - {x}" for x in assumption_lines(fd.assumptions)]
    return bool(counts)


def _agg_at_rate(a: argparse.Namespace, fa: Any, lines: list[str], out: dict) -> None:
    """The aggregated answer's deployment at the rate, open loop (as serve-config --request-rate prints it):
    utilisation, the operating point and the rate at which TTFT p99 reaches ``--ttft-limit``."""
    from simcast.render.rate_tables import format_at_rate, rate_row
    from simcast.serving.search.fewest import at_rate

    got = at_rate(fa, a.ttft_limit / 1e3 if a.ttft_limit else None, use_disk_cache=a.use_cache)
    if got is None:
        return
    est, limit = got.estimate, got.rate_at_p99_limit_per_s
    lines.append(
        f"          on {got.devices} devices, " + format_at_rate(est, limit, a.ttft_limit).replace("\n", "\n        ")
    )
    out["at_request_rate"] = {"devices": got.devices, **rate_row(est, limit)}


def _fewest_agg(a: argparse.Namespace, space: SearchSpace, agg: tuple[ServingConfig, list, list], rate: float):
    """The aggregated answer (:func:`simcast.serving.search.fewest.fewest_devices`), attention-DP engines
    searched at each device count."""
    from simcast.serving.search.fewest import fewest_devices
    from simcast.serving.search.layouts import search

    base, rows, rejected = agg

    def at(sub: SearchSpace) -> list:
        return search(base, sub, use_disk_cache=a.use_cache, workers=a.workers, ray_address=a.ray_address)[0]

    return fewest_devices(rows, rejected, space, rate, at, moe=base.model.moe is not None)


def _ranked(
    a: argparse.Namespace,
    space: SearchSpace,
    agg_rows: list,
    agg_rej: list,
    dis: tuple[list, list, Any],
    pools: list,
    head: str,
    lines: list[str],
    out: dict,
) -> None:
    """Both modes ranked: the aggregated table, the disaggregated pairs (``dis``: rows, rejected, the
    :class:`~simcast.serving.disagg.search.DisaggSearch`), its Pareto front and replayed finalists, the verdict
    and launch lines."""
    from simcast.cli.disagg_front import front_and_finalists
    from simcast.render.assumption_text import assumption_lines
    from simcast.render.disagg_tables import disagg_row, format_disagg_rows
    from simcast.render.search_tables import format_search, result_row
    from simcast.serving.disagg.search import mechanism
    from simcast.serving.search.layouts import layout_links

    dis_rows, dis_rej = dis[0], dis[1]
    if agg_rows or agg_rej:
        lim = bool(a.ttft_limit or a.tpot_limit)
        agg_head = head + "; aggregated layouts ranked by token/s/device"
        assumptions = agg_rows[0].result.assumptions if agg_rows else ()
        lines.append(format_search(agg_rows, agg_rej, agg_head, a.top, a.show_rejected, assumptions, has_limits=lim))
        out["agg"] = [result_row(c.result, layout_links(c.result.config)) for c in agg_rows]
    if pools:
        lines += ["", f"disaggregated deployments (--kv-transfer {a.kv_transfer}), best point per layout pair:"]
        lines.append(format_disagg_rows(dis_rows, a.top) if dis_rows else "  none meets the limits")
        if a.show_rejected and dis_rej:
            lines += ["rejected:"] + [f"  {lab}: {why}" for lab, why in dis_rej]
        out["disagg"] = [disagg_row(c.result) for c in dis_rows]
        front_and_finalists(a, dis[2], lines, out)
    if agg_rows and dis_rows:
        line, g, s = mechanism(agg_rows[0].result, dis_rows[0].result)
        lines += ["", line]
        out["verdict"] = {"line": line, "decode_gain": g, "decode_share": s}
    if dis_rows:
        lines += ["", "assumptions (disagg, best row):"] + [
            f"  - {x}" for x in assumption_lines(dis_rows[0].result.assumptions)
        ]
    if a.emit and dis_rows:
        from simcast.render.disagg_launch import disagg_launch

        ll = disagg_launch(dis_rows[0].result, a.emit)
        lines += ["", f"launch commands (--emit {a.emit}, best disaggregated row):"]
        lines += [f"   # {n}" for n in ll.notes] + [f"   {c}" for _, c in ll.commands] + [f"   {ll.bench}"]
        out["launch"] = {
            "server": "\n".join(c for _, c in ll.commands),
            "commands": [{"where": w, "command": c} for w, c in ll.commands],
            "bench": ll.bench,
            "notes": list(ll.notes),
        }


def serve_disagg(a: argparse.Namespace, doc: dict, cfg: ServingConfig, values: dict) -> int:
    """``serve-config`` of a service YAML with ``serving_mode: disagg`` (or pool blocks, refused under agg)."""
    from simcast.render.disagg_tables import NULL_DISAGG, disagg_row, format_disagg
    from simcast.serving.disagg.service_yaml import build_disagg_config
    from simcast.serving.disagg.steady import estimate_disagg

    dis = build_disagg_config(doc, cfg, values)
    assert dis is not None  # agg with pool blocks is refused inside
    r = estimate_disagg(dis, use_disk_cache=a.use_cache)
    verdicts = []
    if values.get("ttft_ms"):
        verdicts.append(
            f"TTFT limit {values['ttft_ms']:g} ms: {'met' if r.ttft_s * 1e3 <= values['ttft_ms'] else 'VIOLATED'}"
        )
    if values.get("tpot_ms"):
        verdicts.append(
            f"TPOT limit {values['tpot_ms']:g} ms: {'met' if r.tpot_s * 1e3 <= values['tpot_ms'] else 'VIOLATED'}"
        )
    fits = _pool_fits(r)
    bench = replay_disagg(a, dis, r, values.get("max_concurrency") or 0) if a.num_prompts else None
    if a.json:
        row = {**disagg_row(r), "limits": verdicts}
        row["fits"] = all(f.fits for f in fits)
        row["memory"] = {f.role: {"fits": f.fits, "allows": f.allows, "line": f.line} for f in fits}
        if bench is not None:
            from simcast.render.disagg_tables import disagg_bench_row

            row["request_level"] = disagg_bench_row(bench)
        emit_json(row, null_reason=NULL_DISAGG)
    else:
        text = format_disagg(r) + "\n" + "\n".join([f.line for f in fits] + verdicts)
        if bench is not None:
            from simcast.render.disagg_tables import format_disagg_bench

            text += "\n\n" + format_disagg_bench(bench)
        emit(text)
    return 0


def _pool_fits(r: DisaggResult) -> tuple[PoolFit, PoolFit]:
    """Each pool's memory check at its operating point: the prefill pool at the prompts its full steps hold,
    the decode pool at its running requests per DP rank (``fits: false`` as the aggregated output says it)."""
    from simcast.serving.disagg.pool_memory import pool_fit

    pc, dc = r.config.prefill, r.config.decode
    return (
        pool_fit(pc, "prefill", r.prefill.prompts_per_step * pc.microbatches),
        pool_fit(dc, "decode", r.decode.concurrency),
    )


def replay_disagg(a: argparse.Namespace, dis: DisaggConfig, r: DisaggResult, max_concurrency: int = 0) -> DisaggBench:
    """``serve-config --num-prompts``: the service's requests through both pools, request by request (work
    bounded first, as bench-serve bounds it); ``max_concurrency`` (0: none): the service YAML's client cap."""
    from simcast.serving.disagg.requests import simulate_disagg_requests
    from simcast.serving.request_level.simulate import make_requests
    from simcast.serving.request_level.work import require_bench_work, token_steps

    w = dis.decode.workload
    rate = a.request_rate or r.request_rate_per_s
    n = a.num_prompts
    for pool, lengths in ((dis.prefill, (w.input_length, 1)), (dis.decode, (1, w.output_length))):
        budget = pool.policy.max_num_batched_tokens
        require_bench_work("--num-prompts", n, token_steps([lengths] * n, budget), 1.0, budget)
    reqs = make_requests(num_prompts=n, rate=rate, input_len=w.input_length, output_len=w.output_length, seed=a.seed)
    return simulate_disagg_requests(reqs, dis, use_disk_cache=a.use_cache, max_concurrency=max_concurrency)
