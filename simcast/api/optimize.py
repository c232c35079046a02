"""``optimize``: search TP x PP x DP (x EP) layouts and concurrencies for the most token/s per device
within TTFT/TPOT limits, as ``simcast optimize`` does (the command calls :func:`search_space`,
:func:`optimize_setup` and :func:`run_search` on the :class:`SearchOptions` of its flags, as
:func:`optimize` does on its keywords; ``tests/api/test_api.py`` holds the two equal)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from simcast.api.common import check_int, engine_limits, engine_profile_for, resolve_device, resolve_model
from simcast.api.options import one_call
from simcast.api.search_inputs import SearchOptions, search_space, search_workload
from simcast.api.speculative import speculative_spec
from simcast.core.errors import require
from simcast.inputs import limits

if TYPE_CHECKING:
    import pandas as pd

    from simcast.calib.uncertainty.user_residuals import UserResiduals
    from simcast.inputs.workloads import LengthDistribution
    from simcast.serving.search.layouts import Candidate, Rejection, SearchSpace
    from simcast.serving.steady.model import ServingConfig, Workload


@dataclass(frozen=True, kw_only=True)
class SearchRow:
    """One swept point of one layout (``optimize --json``'s rows, ``--csv``'s columns): times in ms,
    throughput in output tokens/s, memory per device in GiB (the most loaded pipeline stage)."""

    parallel: str
    tp: int
    pp: int
    dp: int
    batch_size: int  # concurrency per replica asked for
    concurrency: int  # requests in flight across the replicas
    ttft_ms: float
    tpot_ms: float
    tokens_per_s: float
    tokens_per_s_per_device: float
    tokens_per_s_per_user: float
    e2e_ms: float
    max_stage_weights_gib: float
    max_stage_kv_gib: float
    max_stage_mem_gib: float
    links: str
    partition: str
    engine: str
    ttft_idle_ms: float  # one prompt on an idle engine
    capped_by: str
    meets_limits: bool
    best: bool  # the layout's chosen point
    pareto: bool  # on the frontier of the points meeting the limits
    prefill_breakdown: str
    decode_breakdown: str
    ep: int
    moe_tp: int
    moe_dp: int
    chunk_tokens: int  # the prompt chunk (the engine's token budget per step)
    dynamic_chunking: bool  # SGLang's dynamic chunking sized the chunks after the first


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """Every point swept (``rows``: each layout's best point first, layouts ranked by token/s/device at
    their best point), the layouts refused with the rule (``rejected``), and what produced them."""

    rows: tuple[SearchRow, ...]
    rejected: tuple[Rejection, ...]
    candidates: tuple[Candidate, ...]  # the serving results behind the rows (ServingResult per point)
    space: SearchSpace
    config: ServingConfig  # the base configuration (its parallel layout and batch size are searched)
    user_residuals: UserResiduals | None = None  # the --engine-profile's leave-one-out residuals (intervals)

    def best(self) -> tuple[SearchRow, ...]:
        """Each layout's best point, ranked (the rows of the CLI's table)."""
        return tuple(r for r in self.rows if r.best)

    def to_dict(self) -> dict[str, Any]:
        """``rows`` and ``rejected`` as ``simcast optimize --json`` prints them (less ``run``)."""
        return {
            "rows": [asdict(r) for r in self.rows],
            "rejected": [{"parallel": r.parallel, "reason": r.reason} for r in self.rejected],
        }

    def uncertainty(self, top: int = 5) -> dict[str, Any]:
        """The best layout's 80 % intervals (from ``user_residuals`` where they hold enough), the layouts among
        the ``top`` ranked within simcast's error of it and the bench command of each worth running: the
        ``uncertainty`` block of ``simcast optimize --json`` (``--top`` there)."""
        from simcast.api.search_uncertainty import search_uncertainty

        return search_uncertainty(list(self.candidates), self.config.runtime, top, self.user_residuals)[0]

    def to_dataframe(self) -> pd.DataFrame:
        """Every point, one row each (the CLI's ``--csv`` columns, less run metadata)."""
        import pandas as pd

        from simcast.render.search_tables import COLUMNS

        return pd.DataFrame([asdict(r) for r in self.rows], columns=COLUMNS)


@dataclass(frozen=True, kw_only=True)
class OptimizeSetup:
    """What a search runs on: the base configuration, the space, and the request lengths."""

    config: ServingConfig
    space: SearchSpace
    workload: Workload
    lengths: LengthDistribution | None  # a shipped distribution (dataset_name), else None


def optimize_setup(o: SearchOptions, space: SearchSpace) -> OptimizeSetup:
    """The base :class:`ServingConfig` of a search over ``space`` (:func:`search_space` of ``o``); with no
    ep or moe_dp sizes given, an MoE model's TP groups are replicas."""
    from simcast.core.specs import ParallelSpec
    from simcast.deploy.deployment import Deployment
    from simcast.serving.steady.model import ServingConfig

    require(o.usage in ("server", "offline"), "--usage", o.usage, "allowed: server, offline")
    check_int("--max-num-seqs", o.max_num_seqs, 1, limits.MAX_REQUESTS)
    check_int("--devices-per-node", o.devices_per_node, 1, limits.MAX_DEVICES_PER_NODE)
    mem = engine_limits(o)
    m = resolve_model(o.model, quantization=o.quantization)
    dev = resolve_device(o.device, devices_per_node=o.devices_per_node, fabric=o.fabric)
    workload, dist = search_workload(o)
    for c in space.chunk_sizes:  # a chunk plan's microbatches are bounded like --microbatches
        n = -(-workload.input_length // c)
        require(
            n <= limits.MAX_MICROBATCHES,
            "--chunked-prefill-sizes",
            c,
            f"gives {n} chunks of the {workload.input_length}-token prompt; at most {limits.MAX_MICROBATCHES} "
            "(raise the chunk size)",
        )
    if m.moe is not None and o.ep_sizes is None and o.moe_dp_sizes is None:  # tp T: T-way replicas, own experts
        space = replace(space, moe_replicas=True)
    deployment = Deployment.build(
        model=m,
        device=dev,
        parallel=ParallelSpec(world_size=1),
        partition=o.partition,
        engine=o.engine,
        expert_imbalance=o.expert_imbalance,
        kv_cache_dtype=o.kv_cache_dtype,
        moe_comm=o.moe_comm_flags(),
        engine_settings=tuple((o.engine_settings or {}).items()),
    )
    base = ServingConfig(
        deployment=deployment,
        workload=workload,
        usage=o.usage,
        batch_size=1,
        max_num_seqs=o.max_num_seqs or 0,
        engine_profile=engine_profile_for(o.engine_profile, o.engine, dev),
        speculative=speculative_spec(m, o),
        **mem,  # type: ignore[arg-type]
    )
    return OptimizeSetup(config=base, space=space, workload=workload, lengths=dist)


def run_search(setup: OptimizeSetup, o: SearchOptions) -> SearchResult:
    """Search ``setup``'s space (:func:`simcast.serving.search.layouts.search`, with ``o``'s cache, workers and
    progress bar) and tabulate every point."""
    from simcast.render.search_tables import point_rows
    from simcast.serving.search.layouts import meets, search

    cands, rejected = search(
        setup.config,
        setup.space,
        use_disk_cache=o.use_cache,
        progress=o.progress,
        workers=o.workers,
        ray_address=o.ray_address,
    )
    keep = [f.name for f in fields(SearchRow)]  # the CSV's columns (speculative runs add two more to the table's)
    rows = tuple(SearchRow(**{k: r[k] for k in keep}) for r in point_rows(cands, lambda r: meets(r, setup.space)))
    from simcast.api.uncertainty import user_residuals

    return SearchResult(
        rows=rows,
        rejected=tuple(rejected),
        candidates=tuple(cands),
        space=setup.space,
        config=setup.config,
        user_residuals=user_residuals(o.engine_profile),
    )


def run_optimize(o: SearchOptions) -> SearchResult:
    """``simcast optimize`` (aggregated serving): every legal layout of ``num_devices`` devices from
    ``tp_sizes`` x ``pp_sizes`` (x ``ep_sizes`` x ``moe_dp_sizes`` for MoE models), each swept over
    concurrency (or ``batch_sizes``) with the ``engine``'s scheduler defaults, for requests of
    ``input_length``/``output_length`` tokens or a shipped ``dataset_name`` distribution; ranked by
    output token/s per device at each layout's best point within ``ttft_limit_ms``/``tpot_limit_ms``.
    ``workers``: processes (1 serial, None: chosen from the work); ``use_cache=False`` bypasses the
    on-disk trace cache. ``to_dataframe()`` has every point with ``meets_limits``/``best``/``pareto``.
    ``chunked_prefill_sizes`` searches the prompt chunk per layout ([]: a default set); ``prefix_hit_rate``
    is the share of prompt tokens the prefix cache serves (``prefix_caching``: None, the engine's default);
    speculative decoding as :func:`simcast.api.speculative.speculative_spec` takes it.
    """
    return run_search(optimize_setup(o, search_space(o)), o)


optimize = one_call("optimize", SearchOptions, run_optimize)
"""``simcast optimize`` as one call: :func:`run_optimize` on ``SearchOptions(**keywords)``."""
