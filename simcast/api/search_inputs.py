"""The search's inputs of ``optimize`` (:mod:`simcast.api.optimize`): the layouts and limits searched
(:func:`search_space`) and the requests' lengths (:func:`search_workload`), each argument bounded like its
``simcast optimize`` flag, an error naming that flag."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from simcast.api.common import check_float, check_int
from simcast.core.errors import require
from simcast.inputs import limits

if TYPE_CHECKING:
    from simcast.inputs.workloads import LengthDistribution
    from simcast.serving.model import Workload
    from simcast.serving.search import SearchSpace


def search_space(
    *,
    num_devices: int,
    tp_sizes: Sequence[int] | None = None,
    pp_sizes: Sequence[int] | None = None,
    ep_sizes: Sequence[int] | None = None,
    moe_dp_sizes: Sequence[int] | None = None,
    batch_sizes: Sequence[int] | None = None,
    ttft_limit_ms: float | None = None,
    tpot_limit_ms: float | None = None,
    chunked_prefill_sizes: Sequence[int] | None = None,
) -> SearchSpace:
    """The checked :class:`SearchSpace`: sizes None -> tp: powers of two <= num_devices, others [1];
    [] -> powers of two <= num_devices. A limit of None (or 0) is no limit. ``chunked_prefill_sizes``:
    prompt chunk sizes searched per layout (None: the engine's own only; []: 2048 4096 8192 16384 and the
    engine's own)."""
    from simcast.serving.chunk_search import AUTO_CHUNK_SIZES
    from simcast.serving.search import SearchSpace, check_space, resolve_search_sizes

    check_int("--num-devices", num_devices, 1, limits.MAX_DEVICES)
    bs = tuple(batch_sizes or ())
    require(
        len(bs) <= limits.MAX_BATCH_SIZES,
        "--batch-sizes",
        f"{len(bs)} values",
        f"at most {limits.MAX_BATCH_SIZES} values (each is one steady-state estimate per layout searched)",
    )
    for b in bs:
        check_int("--batch-sizes", b, 1, limits.MAX_REQUESTS)
    chunks = tuple(chunked_prefill_sizes or ())
    require(
        len(chunks) <= limits.MAX_CHUNK_SIZES,
        "--chunked-prefill-sizes",
        f"{len(chunks)} values",
        f"at most {limits.MAX_CHUNK_SIZES} values (each is a concurrency sweep per layout searched)",
    )
    for c in chunks:
        check_int("--chunked-prefill-sizes", c, 1, limits.MAX_BATCHED_TOKENS)
    for flag, lim in (("--ttft-limit", ttft_limit_ms), ("--tpot-limit", tpot_limit_ms)):
        ok = lim is None or (isinstance(lim, int | float) and 0 <= lim <= limits.MAX_LIMIT_MS)
        require(ok, flag, lim, f"must be a number of milliseconds in [0, {limits.MAX_LIMIT_MS:g}]")
    n = num_devices
    space = SearchSpace(
        tp_sizes=tuple(resolve_search_sizes(tp_sizes, n, None, "--tp-sizes")),
        pp_sizes=tuple(resolve_search_sizes(pp_sizes, n, 1, "--pp-sizes")),
        num_devices=n,
        ep_sizes=tuple(resolve_search_sizes(ep_sizes, n, 1, "--ep-sizes")),
        moe_dp_sizes=tuple(resolve_search_sizes(moe_dp_sizes, n, 1, "--moe-dp-sizes")),
        batch_sizes=bs,
        ttft_limit_s=ttft_limit_ms / 1e3 if ttft_limit_ms else float("inf"),
        tpot_limit_s=tpot_limit_ms / 1e3 if tpot_limit_ms else float("inf"),
        chunk_sizes=(chunks or AUTO_CHUNK_SIZES) if chunked_prefill_sizes is not None else (),
    )
    check_space(space)
    return space


def search_workload(
    *,
    input_length: int | None,
    output_length: int | None,
    dataset_name: str | None,
    max_num_batched_tokens: int | None,
    prefix_hit_rate: float = 0.0,
) -> tuple[Workload, LengthDistribution | None]:
    """(Workload, LengthDistribution | None) from ``dataset_name`` or the fixed lengths; ``prefix_hit_rate``:
    the share of prompt tokens the prefix cache serves, in [0, 1)."""
    from simcast.serving.model import Workload

    check_float("--prefix-hit-rate", prefix_hit_rate, 0.0, 1.0)
    require(
        prefix_hit_rate < 1, "--prefix-hit-rate", prefix_hit_rate, "must be in [0, 1) (one prompt token is computed)"
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
    p, i, o = dist.support()
    return (
        Workload(
            input_length=max(1, round(dist.mean_input_tokens)),
            output_length=max(1, round(dist.mean_output_tokens)),
            max_batched_tokens=budget,
            length_mix=tuple((float(w), int(x), int(y)) for w, x, y in zip(p, i, o)),
            name=dataset_name,
            prefix_hit_rate=prefix_hit_rate,
        ),
        dist,
    )
