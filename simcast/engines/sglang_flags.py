"""SGLang's own flags (the settings launch scripts use) and its kernel choices on ROCm, each with its source
(:mod:`simcast.engines.sglang` holds the rest of what SGLang decides)."""

from __future__ import annotations

from simcast.engines.flags import EngineFlag

_SG_ARGS = "sgl-project/sglang python/sglang/srt/server_args.py@001067f"
_SG_OUT = "sgl-project/sglang python/sglang/srt/managers/scheduler_output_processor_mixin.py@5294b03"
_SG_RECV = (
    "sgl-project/sglang python/sglang/srt/managers/scheduler_recv_skipper.py@70310f0 (weights: decode 1, other 1000)"
)
_SG_V03 = (
    "python/sglang/srt/managers/tp_worker.py (v0.3) forward_step: num_continue_decode_steps decode batches in a row"
)
OWN_FLAGS: tuple[EngineFlag, ...] = (
    EngineFlag(
        names=("--disable-radix-cache",),
        dest="prefix_caching",
        action="store_false",
        group="prefix_caching",
        engine="sglang",
        help="SGLang's flag: prefix caching off (the same setting as --no-enable-prefix-caching)",
    ),
    EngineFlag(
        names=("--stream-interval",),
        dest="stream_interval",
        keyword="stream_interval",
        default=1,
        unit="tokens",
        check=(1, 100_000),
        engine="sglang",
        source=f"{_SG_ARGS} ServerArgs.stream_interval; {_SG_OUT} stream_output_generation",
        help="SGLang --stream-interval: after the first token (sent at once) the client gets tokens in chunks of "
        "this many (a request's n-th token is sent when n mod interval is 1, and at its end): TTFT unchanged, each "
        "client-side inter-token gap spans that many steps [default 1, SGLang's]",
    ),
    EngineFlag(
        names=("--scheduler-recv-interval",),
        dest="scheduler_recv_interval",
        keyword="scheduler_recv_interval",
        default=1,
        unit="steps",
        check=(1, 100_000),
        engine="sglang",
        source=f"{_SG_ARGS} ServerArgs.scheduler_recv_interval; {_SG_RECV}",
        help="SGLang --scheduler-recv-interval: while decoding, the scheduler takes in new requests once every "
        "this many decode steps (after a prefill step at once) [default 1, SGLang's]",
    ),
    EngineFlag(
        names=("--cuda-graph-max-bs",),
        dest="cuda_graph_max_bs",
        keyword="cuda_graph_max_bs",
        unit="requests",
        check=(1, 100_000),
        engine="sglang",
        source=f"{_SG_ARGS} ServerArgs._handle_gpu_memory_settings",
        help="SGLang --cuda-graph-max-bs: decode steps of at most this many requests replay a captured CUDA graph, "
        "larger ones run eagerly (every kernel launched from the host) [default: SGLang's by GPU memory and TP "
        "size, 24-512]",
    ),
    EngineFlag(
        names=("--num-continuous-decode-steps",),
        dest="num_continuous_decode_steps",
        keyword="num_continuous_decode_steps",
        default=1,
        unit="steps",
        check=(1, 100_000),
        engine="sglang",
        source=f"{_SG_ARGS} ServerArgs.num_continuous_decode_steps; {_SG_V03}",
        help="SGLang --num-continuous-decode-steps: decode steps run back to back before the scheduler looks for "
        "new prompts again [default 1, SGLang's]",
    ),
)
"""The flags only SGLang accepts (:mod:`simcast.engines.flags`)."""

ROCM_KERNELS = {
    "gemm": "aiter tuned GEMMs / hipBLASLt when SGLANG_USE_AITER=1 (python/sglang/srt/layers/quantization/"
    "fp8_utils.py, _use_aiter = get_bool_env_var('SGLANG_USE_AITER') and is_hip()), else torch / hipBLASLt",
    "attention": "aiter attention backend (MLA decode through aiter's asm kernels) when SGLANG_USE_AITER=1 "
    "(python/sglang/srt/server_args.py picks attention_backend 'aiter' on HIP), else Triton",
    "moe": "aiter fused MoE (CK / asm) when SGLANG_USE_AITER=1 (python/sglang/srt/layers/moe/fused_moe_triton/"
    "layer.py _use_aiter), else Triton fused_moe",
}
"""SGLang's kernel choices on ROCm (the switch is an environment variable its ROCm images set). The aiter GEMMs
(fp8 block-scale, fp8, bf16) and fused MoE are fitted per device on aiter's own tuned-kernel tables
(``engines.sglang`` of the mi300x / mi325x / mi355x profiles, ``scripts/fit_aiter.py``, ROCm/aiter@e4048607a5);
attention and the all-reduce, which have no public aiter timing table, borrow the profile's vLLM fits, labelled
as a fallback (transferred) in every output."""
