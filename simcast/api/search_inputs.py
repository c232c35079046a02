"""The search's inputs of ``optimize`` (:mod:`simcast.api.optimize`): the layouts and limits searched
(:func:`search_space`) and the requests' lengths (:func:`search_workload`), each argument bounded like its
``simcast optimize`` flag, an error naming that flag."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from simcast.api.common import EXPERT_IMBALANCE_FLAG, ServingEngineOptions, TargetOptions, check_int, check_options
from simcast.api.moe_comm_options import MoECommOptions
from simcast.api.moe_options import WideEPOptions
from simcast.api.options import Flag, opt, required
from simcast.api.speculative import SpeculativeOptions
from simcast.core.errors import require
from simcast.core.moe import DEFAULT_EXPERT_IMBALANCE
from simcast.inputs import limits

if TYPE_CHECKING:
    from simcast.inputs.workloads import LengthDistribution
    from simcast.serving.search.layouts import SearchSpace
    from simcast.serving.steady.model import Workload


@dataclass(frozen=True, kw_only=True)
class SearchOptions(MoECommOptions, WideEPOptions, SpeculativeOptions, ServingEngineOptions, TargetOptions):
    """The keywords of :func:`simcast.api.optimize.optimize` (``simcast optimize``'s flags of the
    aggregated search): the devices, the layouts and concurrencies searched, the limits, the requests."""

    """The keywords of :func:`simcast.api.optimize.optimize` (``simcast optimize``'s flags of the
    aggregated search): the devices, the layouts and concurrencies searched, the limits, the requests."""

    num_devices: int = field(
        metadata=required(
            "devices the layouts are made of",
            flag=Flag(names=("--num-devices",), help="devices in the deployment [<= 65536]", value_type="devices"),
        )
    )
    input_length: int | None = opt(
        None,
        "prompt tokens per request (None: with a dataset_name)",
        flag=Flag(
            names=("--input-length",), help="ISL, tokens [<= 10^7; required unless --dataset-name]", value_type="tokens"
        ),
    )
    output_length: int | None = opt(
        None,
        "output tokens per request (None: with a dataset_name)",
        flag=Flag(
            names=("--output-length",),
            help="OSL, tokens [<= 10^7; required unless --dataset-name]",
            value_type="tokens",
        ),
    )
    dataset_name: str | None = opt(
        None,
        "a shipped length distribution instead of fixed lengths",
        flag=Flag(
            names=("--dataset-name",),
            help="a shipped request-length distribution (simcast workloads: sharegpt, arxiv_summarization, ...): the "
            "steady state takes its means and its KV per running request over the whole distribution, finite runs "
            "draw from it [default: fixed --input-length / --output-length]",
        ),
    )
    usage: Literal["server", "offline"] = opt(
        "server",
        "the engine as a server or offline (vLLM's defaults differ)",
        flag=Flag(
            names=("--usage",),
            help="the engine runs as a server (vllm serve) or offline (vllm.LLM / vllm bench throughput): vLLM's "
            "defaults differ (offline: 16384 batched tokens on big GPUs) [default server]",
            choices=("server", "offline"),
        ),
    )
    tp_sizes: Sequence[int] | None = opt(
        None,
        "TP sizes searched (None: powers of two <= num_devices)",
        flag=Flag(
            names=("--tp-sizes",),
            help="TP sizes; absent: powers of two <= num-devices; no value: same",
            nargs="*",
        ),
    )
    pp_sizes: Sequence[int] | None = opt(
        None,
        "PP sizes searched (None: 1; []: powers of two <= num_devices)",
        flag=Flag(
            names=("--pp-sizes",), help="PP sizes; absent: [1]; no value: powers of two <= num-devices", nargs="*"
        ),
    )
    ep_sizes: Sequence[int] | None = opt(
        None,
        "MoE: EP sizes searched (None: 1; []: powers of two)",
        flag=Flag(
            names=("--ep-sizes",),
            help="MoE expert-parallel sizes; absent: [1]; no value: powers of two <= num-devices",
            nargs="*",
        ),
    )
    moe_dp_sizes: Sequence[int] | None = opt(
        None,
        "MoE: expert DP sizes searched (None: 1; []: powers of two)",
        flag=Flag(
            names=("--moe-dp-sizes",),
            help="MoE expert data-parallel sizes; absent: [1]; no value: powers of two <= num-devices",
            nargs="*",
        ),
    )
    batch_sizes: Sequence[int] | None = opt(
        None,
        "concurrencies per replica tried (None: 1, 2, 3, 4, 6, 8, 12, ... up to what memory allows, <= 4096)",
        flag=Flag(
            names=("--batch-sizes",),
            help="restrict concurrency per replica to these values (default: 1, 2, 3, 4, 6, 8, 12, ... up to what "
            "memory allows, at most 4096) "
            "[each <= 10^6, at most 256 values]",
            nargs="+",
        ),
    )
    ttft_limit_ms: float | None = opt(
        None,
        "time to first token limit, ms (None or 0: none)",
        flag=Flag(names=("--ttft-limit",), help="TTFT limit, ms", value_type="limit_ms", dest="ttft_limit"),
    )
    tpot_limit_ms: float | None = opt(
        None,
        "time per output token limit, ms (None or 0: none)",
        flag=Flag(names=("--tpot-limit",), help="TPOT limit, ms", value_type="limit_ms", dest="tpot_limit"),
    )
    chunked_prefill_sizes: Sequence[int] | None = opt(
        None,
        "prompt chunk sizes searched per layout, tokens (None: the engine's; []: a default set)",
        flag=Flag(
            names=("--chunked-prefill-sizes",),
            help="search the prompt chunk size per layout (vLLM --max-num-batched-tokens, SGLang "
            "--chunked-prefill-size; with SGLang at PP > 1 also --enable-dynamic-chunking on/off): each layout keeps "
            "the setting with the lowest 1-prompt TTFT whose best point meets the limits (within 1%%: the higher "
            "token/s/device); absent: the engine's own chunk only; no value: 2048 4096 8192 16384 and the engine's "
            "own [each <= 10^9, at most 16 values]",
            nargs="*",
        ),
    )
    expert_imbalance: float = opt(
        DEFAULT_EXPERT_IMBALANCE,
        "MoE: busiest expert rank's load over the uniform-routing expectation",
        flag=EXPERT_IMBALANCE_FLAG,
    )
    devices_per_node: int | None = opt(
        None,
        "devices per node (None: the profile's)",
        flag=Flag(names=("--devices-per-node",), help="override the profile [<= 1024]", value_type="devices_per_node"),
    )
    prefix_hit_rate: float = opt(
        0.0,
        "share of prompt tokens the prefix cache serves, in [0, 1)",
        flag=Flag(
            names=("--prefix-hit-rate",),
            help="share of prompt tokens the prefix cache serves (a prefix every prompt shares, e.g. a system "
            "prompt; bench-serve --random-prefix-len P --random-input-len I gives about P/(P+I)): only the rest is "
            "prefilled, attention still spans the whole context, the shared prefix's KV is held once; 0 with "
            "--no-enable-prefix-caching [0, < 1]",
            value_type="hit_rate",
        ),
    )
    workers: int | None = opt(1, "local worker processes (1: serial; None: chosen from the work)")
    ray_address: str | None = opt(
        None,
        "run the search's tasks on the Ray cluster at this address",
        flag=Flag(
            names=("--ray",),
            help="run the sweep's tasks on the Ray cluster at ADDRESS (e.g. auto, ray://head:10001); "
            "needs pip install 'simcast[distributed]' and simcast on the cluster's nodes",
            metavar="ADDRESS",
        ),
    )
    progress: bool | None = opt(
        False, "a progress bar on stderr (None: when stderr is a terminal, on searches of over 4 tasks)"
    )


DEMO_MODEL = "meta-llama/Llama-3.1-70B"
"""The model of the demo search (``make demo``)."""
DEMO_REPORT = "demo-report.html"
"""The HTML report ``make demo`` writes beside its table (``--report``)."""
DEMO_SEARCH: dict[str, Any] = {
    "input_length": 2048,
    "output_length": 512,
    "num_devices": 8,
    "tp_sizes": (1, 2, 4, 8),
    "pp_sizes": (1, 2, 4, 8),
    "device": "h100_sxm",
}
"""The demo search's :class:`SearchOptions` keywords less the model: Llama-3.1-70B on 8 x H100, ISL 2048 /
OSL 512, tp x pp in {1, 2, 4, 8}; ``make demo``, ``benchmarks/search_speed.py``,
``scripts/build_shipped_traces.py`` (each shipped model searched so) and ``tests/api/test_api.py`` run it
(:func:`demo_flags`: the same as ``simcast optimize`` flags, each keyword's flag its name with dashes)."""


def demo_flags() -> list[str]:
    """:data:`DEMO_SEARCH` as ``simcast optimize`` flags, in its order (the model not among them)."""
    out = []
    for k, v in DEMO_SEARCH.items():
        out += [f"--{k.replace('_', '-')}", *(str(x) for x in (v if isinstance(v, tuple) else (v,)))]
    return out


def search_space(o: SearchOptions) -> SearchSpace:
    """The checked :class:`SearchSpace`: sizes None -> tp: powers of two <= num_devices, others [1];
    [] -> powers of two <= num_devices. A limit of None (or 0) is no limit. ``chunked_prefill_sizes``:
    prompt chunk sizes searched per layout (None: the engine's own only; []: 2048 4096 8192 16384 and the
    engine's own)."""
    from simcast.serving.search.chunk_search import AUTO_CHUNK_SIZES
    from simcast.serving.search.layouts import SearchSpace, check_space, resolve_search_sizes

    check_options(o)  # every field with a bounded flag: the range its flag takes (simcast.inputs.bounds)
    bs = tuple(o.batch_sizes or ())
    require(
        len(bs) <= limits.MAX_BATCH_SIZES,
        "--batch-sizes",
        f"{len(bs)} values",
        f"at most {limits.MAX_BATCH_SIZES} values (each is one steady-state estimate per layout searched)",
    )
    for b in bs:
        check_int("--batch-sizes", b, 1, limits.MAX_REQUESTS)
    chunks = tuple(o.chunked_prefill_sizes or ())
    require(
        len(chunks) <= limits.MAX_CHUNK_SIZES,
        "--chunked-prefill-sizes",
        f"{len(chunks)} values",
        f"at most {limits.MAX_CHUNK_SIZES} values (each is a concurrency sweep per layout searched)",
    )
    for c in chunks:
        check_int("--chunked-prefill-sizes", c, 1, limits.MAX_BATCHED_TOKENS)
    ttft_limit_ms, tpot_limit_ms = o.ttft_limit_ms, o.tpot_limit_ms
    n = o.num_devices
    space = SearchSpace(
        tp_sizes=tuple(resolve_search_sizes(o.tp_sizes, n, None, "--tp-sizes")),
        pp_sizes=tuple(resolve_search_sizes(o.pp_sizes, n, 1, "--pp-sizes")),
        num_devices=n,
        ep_sizes=tuple(resolve_search_sizes(o.ep_sizes, n, 1, "--ep-sizes")),
        moe_dp_sizes=tuple(resolve_search_sizes(o.moe_dp_sizes, n, 1, "--moe-dp-sizes")),
        batch_sizes=bs,
        ttft_limit_s=ttft_limit_ms / 1e3 if ttft_limit_ms else float("inf"),
        tpot_limit_s=tpot_limit_ms / 1e3 if tpot_limit_ms else float("inf"),
        chunk_sizes=(chunks or AUTO_CHUNK_SIZES) if o.chunked_prefill_sizes is not None else (),
        redundant_experts=o.ep_num_redundant_experts,
        eplb=o.enable_eplb,
    )
    check_space(space)
    return space


def search_workload(o: SearchOptions) -> tuple[Workload, LengthDistribution | None]:
    """(Workload, LengthDistribution | None) from ``dataset_name`` or the fixed lengths; ``prefix_hit_rate``:
    the share of prompt tokens the prefix cache serves, in [0, 1)."""
    from simcast.serving.steady.model import Workload

    input_length, output_length, dataset_name = o.input_length, o.output_length, o.dataset_name
    prefix_hit_rate, max_num_batched_tokens = o.prefix_hit_rate, o.max_num_batched_tokens
    require(
        limits.prefix_hit_rate_ok(prefix_hit_rate), "--prefix-hit-rate", prefix_hit_rate, limits.PREFIX_HIT_RATE_RANGE
    )
    require(
        not (prefix_hit_rate and o.prefix_caching is False),
        "--prefix-hit-rate",
        prefix_hit_rate,
        "conflicts with prefix caching off (--no-enable-prefix-caching, --disable-radix-cache, "
        "prefix_caching=False): a hit rate needs the prefix cache; give one of the two",
    )
    check_int("--input-length", input_length, 1, limits.MAX_TOKENS)
    check_int("--output-length", output_length, 1, limits.MAX_TOKENS)
    check_int("--max-num-batched-tokens", max_num_batched_tokens, 1, limits.MAX_BATCHED_TOKENS)
    budget = max_num_batched_tokens or 0
    if dataset_name in (None, "random"):
        require(
            input_length is not None and output_length is not None,
            "--input-length/--output-length",
            f"{input_length}/{output_length}",
            "both are required unless --dataset-name names a shipped distribution",
        )
        assert input_length is not None and output_length is not None
        return (
            Workload(
                input_length=input_length,
                output_length=output_length,
                max_batched_tokens=budget,
                prefix_hit_rate=prefix_hit_rate,
            ),
            None,
        )
    from simcast.inputs.workloads import load_distribution

    dist = load_distribution(dataset_name)
    require(
        input_length is None and output_length is None,
        "--input-length/--output-length",
        f"{input_length}/{output_length}",
        f"not with --dataset-name {dataset_name} (its lengths come from the distribution)",
    )
    weights, ins, outs = dist.support()
    return (
        Workload(
            input_length=max(1, round(dist.mean_input_tokens)),
            output_length=max(1, round(dist.mean_output_tokens)),
            max_batched_tokens=budget,
            length_mix=tuple((float(w), int(x), int(y)) for w, x, y in zip(weights, ins, outs)),
            name=dataset_name,
            prefix_hit_rate=prefix_hit_rate,
        ),
        dist,
    )
