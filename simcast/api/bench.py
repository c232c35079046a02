"""``bench_serve``: a simulated ``vllm bench serve`` run, request by request (arrivals, the engine's
scheduler, KV blocks), as ``simcast bench-serve`` runs it (the command calls :func:`run_bench` on the
:class:`BenchOptions` of its flags, :func:`bench_serve` on its keywords; ``tests/api/test_api.py`` holds the two
equal)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simcast.api.bench_front_end import _front_end_notes as _front_end_notes
from simcast.api.bench_front_end import _front_end_processes as _front_end_processes
from simcast.api.bench_notes import _chunking_notes as _chunking_notes
from simcast.api.bench_requests import RequestOptions, build_requests
from simcast.api.bench_work import bounded_run
from simcast.api.common import (
    ServingEngineOptions,
    TargetOptions,
    check_int,
    check_options,
    engine_limits,
    engine_profile_for,
    resolve_device,
    resolve_model,
)
from simcast.api.disagg_options import DisaggOptions
from simcast.api.moe_comm_options import MoECommOptions
from simcast.api.moe_options import MoELayoutOptions, moe_parallel
from simcast.api.options import Flag, one_call, opt
from simcast.api.speculative import SpeculativeOptions, speculative_spec
from simcast.core.chunking import SGLANG_SMOOTH_FACTOR
from simcast.core.errors import require
from simcast.inputs import limits
from simcast.serving.request_level.routers import ROUTERS, RouterName, check_router, router_note

if TYPE_CHECKING:
    import pandas as pd

    from simcast.calib.uncertainty.figures import FigureInterval
    from simcast.calib.uncertainty.user_residuals import UserResiduals
    from simcast.serving.request_level.bench_metrics import BenchMetrics
    from simcast.serving.request_level.bench_result import BenchResult as RequestRun
    from simcast.serving.request_level.simulate import RequestSpec
    from simcast.serving.steady.model import ServingConfig


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    """One simulated run: ``summary`` its ``vllm bench serve`` metrics, typed (times in ms, throughputs per
    s, the steady-state window); ``metrics`` / :meth:`to_dict` the keys ``vllm bench serve --save-result``
    writes plus simcast's steady-state window, deployment and ``assumptions``; ``run`` the request-level
    result (per-request times, step samples: ``simcast.plot_bench`` draws it); ``config`` the serving
    configuration simulated; ``user_residuals`` the ``--engine-profile``'s leave-one-out residuals (None:
    none), which its intervals take where they hold enough."""

    summary: BenchMetrics
    run: RequestRun
    config: ServingConfig
    source: str  # where the request lengths came from: random, dataset <name>, trace <file>
    assumptions: tuple[str, ...] = ()
    user_residuals: UserResiduals | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        """``vllm bench serve``'s keys (:meth:`to_dict`)."""
        return self.to_dict()

    @property
    def duration_s(self) -> float:
        return self.summary.duration_s

    @property
    def output_throughput_tok_s(self) -> float:
        return self.summary.output_throughput_tok_s

    @property
    def request_throughput_req_s(self) -> float:
        return self.summary.request_throughput_req_s

    @property
    def median_ttft_ms(self) -> float:
        return self.summary.ttft.median_ms

    @property
    def p99_ttft_ms(self) -> float:
        return self.summary.ttft.p99_ms

    @property
    def median_tpot_ms(self) -> float:
        return self.summary.tpot.median_ms

    def to_dict(self) -> dict[str, Any]:
        """The ``--save-result`` JSON (less its ``run`` metadata block)."""
        from simcast.api.uncertainty import as_dict
        from simcast.render.bench_tables import bench_json

        cfg, par = self.config, self.config.parallel
        d = bench_json(
            self.summary,
            model_id=cfg.model.name,
            engine=cfg.runtime,
            prefix_caching=cfg.policy.prefix_caching,
            tp=par.tp,
            pp=par.pp,
            dp=par.dp,
            assumptions=list(self.assumptions),
        )
        return {**d, "intervals_80": as_dict(self.intervals)}

    @property
    def intervals(self) -> dict[str, FigureInterval]:
        """80 % prediction intervals of the median TTFT / TPOT / ITL (ms) and the output token/s
        (:mod:`simcast.api.uncertainty`)."""
        from simcast.api.uncertainty import bench_intervals

        m = self.summary
        figures = {
            "median_ttft_ms": m.ttft.median_ms,
            "median_tpot_ms": m.tpot.median_ms,
            "median_itl_ms": m.itl.median_ms,
            "output_throughput": m.output_throughput_tok_s,
        }
        return bench_intervals(
            figures,
            engine=self.config.runtime,
            device=self.config.device,
            max_concurrency=m.max_concurrency or 0,
            request_rate=m.request_rate_per_s,
            user=self.user_residuals,
        )

    def to_dataframe(self) -> pd.DataFrame:
        """One row per request (the ``.requests.csv`` beside ``--save-result``): send time, lengths
        (tokens), TTFT, end-to-end time and TPOT (s), preemptions, replica."""
        import pandas as pd

        from simcast.render.bench_tables import request_rows

        return pd.DataFrame(request_rows(self.run))


@dataclass(frozen=True, kw_only=True)
class BenchOptions(
    DisaggOptions,
    MoECommOptions,
    MoELayoutOptions,
    RequestOptions,
    SpeculativeOptions,
    ServingEngineOptions,
    TargetOptions,
):
    """The keywords of :func:`bench_serve` (``simcast bench-serve``'s flags): the replicas and their
    router, the client's limits, the requests (:class:`RequestOptions`), the engine; ``serving_mode="disagg"``:
    prefill and decode workers (:class:`~simcast.api.disagg_options.DisaggOptions`)."""

    tp: int = opt(
        1,
        "tensor-parallel size of each replica",
        flag=Flag(
            names=("--tp", "--tensor-parallel-size"),
            help="tensor-parallel size of one replica or attention-DP rank, as vLLM's --tensor-parallel-size "
            "(SGLang's/TensorRT-LLM's count: --tp-size)",
            value_type="devices",
        ),
    )
    pp: int = opt(
        1,
        "pipeline-parallel size of each replica",
        flag=Flag(
            names=("--pp", "--pp-size", "--pipeline-parallel-size", "--pp_size"),
            help="pipeline-parallel size",
            value_type="devices",
        ),
    )
    dp: int = opt(
        1,
        "replicas (with --enable-dp-attention: attention-DP ranks of one engine)",
        flag=Flag(
            names=("--dp", "--data-parallel-size"),
            help="replicas behind the router; with --enable-dp-attention / --enable-expert-parallel the attention "
            "data-parallel ranks of one engine, requests dealt to them as the engine's DP controller does",
            value_type="devices",
        ),
    )
    router: RouterName = opt(
        "round_robin",
        "how requests go to the dp replicas (random draws from --seed)",
        flag=Flag(
            names=("--router",),
            help="router across the --dp replicas: round_robin, least_loaded, random (seeded by --seed), "
            "cache_aware (SGLang sgl-router), prefix_aware (llm-d scorers), kv_aware (Dynamo KV router) "
            "[round_robin]",
            choices=ROUTERS,
        ),
    )
    max_concurrency: int | None = opt(
        None,
        "client-side limit on requests in flight (None: none)",
        flag=Flag(names=("--max-concurrency",), help="client-side limit on requests in flight", value_type="requests"),
    )
    num_warmups: int = opt(
        0,
        "vllm bench serve's warm-up requests: accepted, not simulated (noted)",
        flag=Flag(
            names=("--num-warmups",),
            help="warm-up requests vllm bench serve sends and awaits before the timed run; accepted so its lines "
            "replay as they are, not simulated: the timed run starts on an idle, warm engine either way [0]",
            value_type="warmups",
        ),
    )
    enable_dynamic_chunking: bool = opt(
        False,
        "SGLang's dynamic chunking of a prompt's chunks (acts at pp > 1)",
        flag=Flag(
            names=("--enable-dynamic-chunking",),
            help="SGLang's dynamic chunking (--engine sglang, acts at --pp > 1 as in SGLang): a long prompt's chunks "
            "after the first (--max-num-batched-tokens / --chunked-prefill-size) are sized to take as long as the "
            "first, from a quadratic fit of stage 0's prefill time",
            action="store_true",
        ),
    )
    dynamic_chunking_smooth_factor: float = opt(
        SGLANG_SMOOTH_FACTOR,
        "SGLang's smooth factor, in [0, 1]",
        flag=Flag(
            names=("--dynamic-chunking-smooth-factor",),
            help="how far a dynamic chunk moves from the first chunk's size toward the equal-time size "
            f"(SGLANG_DYNAMIC_CHUNKING_SMOOTH_FACTOR) [default {SGLANG_SMOOTH_FACTOR}]",
            value_type="smooth_factor",
        ),
    )


def _check_options(o: BenchOptions) -> None:
    """Each option in its range (one ``SimcastInputError`` naming the flag)."""
    check_options(o)  # every field with a bounded flag: the range its flag takes (simcast.inputs.bounds)
    check_router("--router", o.router)
    require(
        isinstance(o.enable_dynamic_chunking, bool),
        "--enable-dynamic-chunking",
        o.enable_dynamic_chunking,
        "True or False",
    )
    check_int("--max-num-batched-tokens", o.max_num_batched_tokens, 1, limits.MAX_BATCHED_TOKENS)
    check_int("--max-num-seqs", o.max_num_seqs, 1, limits.MAX_REQUESTS)


def _bench_config(o: BenchOptions, reqs: list[RequestSpec], source: str, mem: dict[str, Any]) -> ServingConfig:
    """The serving configuration of the run: its memory estimate's request is the random lengths, or the mean
    lengths of the run's requests (tokens)."""
    from simcast.deploy.deployment import Deployment
    from simcast.serving.steady.model import ServingConfig, Workload

    if source == "random":
        isl, osl = o.prefix_length + o.input_length, o.output_length
    else:
        isl = max(1, round(sum(r.input_len for r in reqs) / len(reqs)))
        osl = max(1, round(sum(r.output_len for r in reqs) / len(reqs)))
    m = resolve_model(o.model, quantization=o.quantization)
    dev = resolve_device(o.device, fabric=o.fabric)
    profile = engine_profile_for(o.engine_profile, o.engine, dev, tp=o.tp, pp=o.pp)
    deployment = Deployment.build(
        model=m,
        device=dev,
        parallel=moe_parallel(o, m, tp=o.tp, pp=o.pp, dp=o.dp),
        partition=o.partition,
        engine=o.engine,
        kv_cache_dtype=o.kv_cache_dtype,
        moe_comm=o.moe_comm_flags(),
        engine_settings=tuple((o.engine_settings or {}).items()),
        moe_dense_tp_size=o.moe_dense_tp_size,
        enable_dp_lm_head=o.enable_dp_lm_head,
    )
    return ServingConfig(
        deployment=deployment,
        workload=Workload(input_length=isl, output_length=osl, max_batched_tokens=o.max_num_batched_tokens or 0),
        batch_size=1,
        max_num_seqs=o.max_num_seqs or 0,
        engine_profile=profile,
        dynamic_chunking=o.enable_dynamic_chunking,
        dynamic_chunking_smooth_factor=o.dynamic_chunking_smooth_factor,
        speculative=speculative_spec(m, o, dataset=dataset_kind(o, source)),
        **mem,
    )


def dataset_kind(o: BenchOptions, source: str) -> str:
    """The prompts' kind for speculative acceptance: random token ids (``--dataset-name random``, no trace) or
    chat (a shipped dataset's or a trace's text)."""
    return "random" if source == "random" and o.dataset_name == "random" else "chat"


def _bench_notes(o: BenchOptions, cfg: ServingConfig, kv_tokens: int, has_prefix: bool, lengths: str) -> list[str]:
    """The run's assumption lines: the engine, the step cost, KV capacity and admission, the serving path,
    chunking, the prefix cache, speculative decoding, the request lengths, the warm-ups."""
    return (
        [
            cfg.policy.describe(),
            "step cost: decodes as one group at their mean context, prompt chunks grouped by rounded "
            "(chunk, context); PP: the step's decodes split into pp microbatches in flight",
            f"KV capacity per replica {kv_tokens} tokens in {cfg.policy.kv_block_tokens}-token blocks; "
            + cfg.policy.admission_note(),
            cfg.policy.serving_path_note(),
        ]
        + _front_end_notes(o, cfg)
        + _chunking_notes(cfg)
        + ([cfg.policy.stream_note()] if cfg.policy.stream_every > 1 else [])
        + ([cfg.policy.prefix_cache_note()] if has_prefix else [])
        + ([router_note(o.router)] if o.dp > 1 else [])
        + cfg.scheme.bench_notes()
        + ([lengths] if lengths else [])
        + (
            [f"{o.num_warmups} warm-up requests (--num-warmups) not simulated: the timed run starts on an idle engine"]
            if o.num_warmups
            else []
        )
    )


def run_bench(o: BenchOptions) -> BenchResult:
    """``simcast bench-serve``: ``num_prompts`` requests sent at ``request_rate`` per s (gamma gaps of
    shape ``burstiness``; inf: all at t = 0) to ``dp`` replicas of TP x PP behind a ``router``, each
    of ``input_length``/``output_length`` tokens (``range_ratio``: uniform within L(1 +- r)), or drawn
    from a shipped ``dataset_name`` distribution, or read from ``dataset_path`` (.jsonl/.csv trace);
    ``max_concurrency`` limits requests in flight (vLLM's client flag). ``prefix_length``: tokens of one
    prefix every random prompt starts with (vLLM's ``--random-prefix-len``, served by the prefix cache when
    ``prefix_caching`` is on: None, the engine's default); ``dataset_name="multiturn"``: conversations of
    ``multiturn_turns`` turns. The ``engine``'s scheduler, token budget and KV blocks decide each step;
    SGLang's dynamic chunking (``enable_dynamic_chunking``, acts at pp > 1) and speculative decoding (as
    :func:`simcast.api.speculative.speculative_spec` takes it) as the CLI's flags. ``num_warmups`` is not
    simulated (noted)."""
    from simcast.serving.request_level.bench_metrics import bench_metrics
    from simcast.serving.request_level.routers import default_settings
    from simcast.serving.request_level.simulate import simulate_requests
    from simcast.serving.search.chunk_search import next_chunk_fn
    from simcast.serving.steady.model import coster_for

    require(o.serving_mode in ("agg", "disagg"), "--serving-mode", o.serving_mode, "allowed: agg, disagg")
    _check_options(o)
    if o.serving_mode == "disagg":
        from simcast.api.bench_disagg import run_disagg_bench

        summary, run, dc, source, lines = run_disagg_bench(o, config=_bench_config, notes_of=_bench_notes)
        return BenchResult(
            summary=summary, run=run, config=dc, source=source, assumptions=lines, user_residuals=_user(o)
        )
    mem = engine_limits(o)
    reqs, source, lengths_note = build_requests(o)
    cfg, kv_tokens = bounded_run(o, _bench_config(o, reqs, source, mem), reqs)
    res = simulate_requests(
        reqs,
        coster_for(cfg, o.use_cache),
        kv_tokens_per_replica=kv_tokens,
        dp=o.dp,
        router=default_settings(o.router, seed=o.seed),
        max_concurrency=o.max_concurrency or 0,
        next_chunk=next_chunk_fn(cfg, use_disk_cache=o.use_cache),
        front_end_processes=_front_end_processes(o, cfg),
    )
    has_prefix = any(r.prefix_id >= 0 or r.parent >= 0 for r in reqs)
    summary = bench_metrics(
        res,
        request_rate_per_s=o.request_rate,
        burstiness=o.burstiness,
        max_concurrency=o.max_concurrency,
        num_prompts=len(reqs),
    )
    notes = tuple(_bench_notes(o, cfg, kv_tokens, has_prefix, lengths_note))
    return BenchResult(summary=summary, run=res, config=cfg, source=source, assumptions=notes, user_residuals=_user(o))


def _user(o: BenchOptions) -> UserResiduals | None:
    """The ``--engine-profile``'s leave-one-out residuals (None: no profile or none in it)."""
    from simcast.api.uncertainty import user_residuals

    return user_residuals(o.engine_profile)


bench_serve = one_call("bench_serve", BenchOptions, run_bench)
"""``simcast bench-serve`` as one call: :func:`run_bench` on ``BenchOptions(**keywords)``."""
