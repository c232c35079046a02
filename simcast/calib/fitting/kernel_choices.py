"""Which declared kernel choices each (engine, system) fit may take, read from the engines' code.

The tables ``simcast calibrate --from-db`` (:mod:`simcast.calib.fitting.from_db`) consults before fitting:
decode and prefill kernel rules, the L2 capacity form, the rows of distinct key/value head sizes and the
GEMM tile rules, each with the source that fixes it. The fits themselves choose among the candidates on the
fitting half.
"""

from __future__ import annotations

DECODE_KERNEL_RULES = {
    **{("trtllm", s): ("", "trtllm_xqa", "trtllm_xqa_mb") for s in ("h100_sxm", "h200_sxm", "a100_sxm", "l40s")},
    ("sglang", "l40s"): ("", "flashinfer_tc"),
    **{("vllm", s): ("", "fa2_varlen") for s in ("a100_sxm", "l40s")},
}
"""(engine, system) pairs whose decode fit may declare the engine's kernel choice: TensorRT-LLM's XQA / masked-MHA
rule holds on SM80-SM90 (XQA's HMMA kernels need SM >= 80, its QGMMA ones SM 90); on Blackwell the engine runs
its trtllm-gen kernels instead, so one kernel is fitted there. Candidates (chosen on the fitting half): the two
families with saturating efficiencies (``trtllm_xqa``) or as multi-block CTA waves (``trtllm_xqa_mb``; for an
fp8 KV cache below SM90 ``trtllm_xqa_sb`` instead, :data:`DECODE_FP8_SINGLE_BLOCK`). SGLang on L40S times
FlashInfer (op ``flashinfer`` in its table) and may declare the engine's tensor-core / CUDA-core choice
(:mod:`simcast.cost.flashinfer_decode`); its A100 table times FlashAttention (op ``flash_attention``), one
kernel. vLLM on A100 and L40S times its FlashAttention-2 build (ops
``vllm_flash_attn``, ``vllm_flash_attn_fa2``; L40S's fp8 rows time FlashInfer, where the fit keeps one kernel) and
may declare its launch: no split for group 1, copies around a GQA launch (:mod:`simcast.cost.flash_decode`)."""
DECODE_FP8_SINGLE_BLOCK = {("trtllm", s) for s in ("a100_sxm", "l40s")}
"""(engine, system) pairs whose fp8-KV decode takes ``trtllm_xqa_sb`` in place of ``trtllm_xqa_mb``: TensorRT-LLM
turns XQA's multi-block mode off for an fp8 KV cache on SM < 90 (``cpp/tensorrt_llm/common/attentionOp.cpp``
@00dbe288 ``convertMMHAParamsToXQAParams``; :mod:`simcast.cost.trtllm_decode_sm89`). A100 (SM80) has no fp8
rows in the database; the L40S (SM89) fp8 table runs one CTA per request and KV head over the whole context
(at batch 1-4 the time of 8 KV heads grows 16 ns per token and does not change with the batch)."""
BLACKWELL = ("b200_sxm", "b300_sxm", "gb200")
PREFILL_KERNEL_RULES = {
    **{("trtllm", s): ("", "trtllm_ctx") for s in ("h100_sxm", "h200_sxm", "a100_sxm", "l40s", *BLACKWELL)},
    **{(e, s): ("", "trtllm_ctx") for e in ("vllm", "sglang") for s in BLACKWELL},
    ("sglang", "l40s"): ("", "flashinfer_fa2"),
    ("vllm", "l40s"): ("",),
}
"""(engine, system) pairs whose prefill fit may add a per-CTA time under a declared CTA layout
(:mod:`simcast.cost.prefill_rules`), chosen on the fitting half: "" (GQA-packed query tiles) or "trtllm_ctx"
(one query head per CTA: TensorRT-LLM's context kernels, and TRT-LLM-gen's, which vLLM's FlashInfer backend
runs on Blackwell, op ``vllm_flashinfer_trtllmprefill`` in its tables, as does SGLang's ``trtllm_mha`` backend
there); "flashinfer_fa2" (FlashInfer's query tile per launch: SGLang's L40S table times FlashInfer, op
``flashinfer``)."""
PREFILL_L2_EDGE = {(e, "l40s") for e in ("sglang", "vllm", "trtllm")}
"""(engine, system) pairs whose prefill fit may take the L2 capacity form of the memory term: on L40S the
tables' prefill times jump several-fold where Q, K, V and O outgrow its 96 MB L2 (e.g. SGLang, 8 KV heads of
128, 64 requests: 58 us at 128 tokens each, 386 us at 256)."""
DECODE_L2_EDGE = {(e, s) for e in ("sglang", "vllm") for s in ("l40s", "a100_sxm")} | {("trtllm", "l40s")}
"""(engine, system) pairs whose decode fit may take the capacity form of the L2 term
(:attr:`simcast.core.kernel_fits.DecodeAttentionFit.l2_edge`), chosen on the fitting half like a kernel rule:
the collector times each decode on a one-layer KV pool of the batch's own tokens, read again on every repeat
(ai-dynamo/aiconfigurator ``collector/sglang/collect_attn.py``@000b9280 ``run_attention_torch``:
``MHATokenToKVPool(size=batch·(input_len+1), layer_num=1)``), so a pool that fits in L2 is served from it. On
L40S (AD102's 96 MB L2, NVIDIA Ada architecture whitepaper, next to 864 GB/s GDDR6) the engines' tables run
at ~3.5 TB/s up to ~80 MiB of KV and ~0.7 TB/s past ~110 MiB; the smooth form spread that edge over two
decades. TensorRT-LLM's L40S table shows the same edge (its collector,
``collector/trtllm/collect_attn.py``@095f58a5, also times one layer's pool, ``num_hidden_layers = 1``): there
the capacity form is a candidate with the declared split rules (``trtllm_xqa_mb``, ``trtllm_xqa_sb``), chosen
the same way."""
DIFF_KV_HEAD_DIM = 192
DIFF_KV_V_HEAD_DIM = 128
DIFF_KV_OPS = ("fa3",)
"""Decode rows of head size 192 in the FlashAttention-3 tables (SGLang's, and vLLM's proxy on H100/H200) are
fitted and scored as keys of 192 and values of 128 elements (column ``v_head_dim``; :mod:`simcast.cost.diff_kv`):
the collector's only head-192 configuration is MiMo-V2-Flash's attention (ai-dynamo/aiconfigurator
``collector/cases/models/MiMoV2FlashForCausalLM_cases.yaml``@e23be5a7: ``head_dim: 192``, ``v_head_dim: 128``;
``collector/sglang/collect_attn.py`` accepts head 192 only under that contract), timed through SGLang's
separate K/V-head-size path. Their long-context times follow 192 + 128 bytes per token and their
short-context floor is ~16 us at batch 1 against ~9-11 us for heads 64-256 (h100_sxm sglang 0.5.14 table);
fitted as 192/192 rows they bent the fit for every other head size (held-out decode p90 ~26 %). The fit may
add ``diff_kv_launch_s`` to such launches (chosen by the optimiser on the fitting half, 0 allowed). Prefill
rows of that shape keep one head size (not refitted with this rule); other tables' head-192 rows (TensorRT-LLM,
Triton, FlashAttention-2) are not given the rule."""
GEMM_FAMILIES = ("bf16", "fp8", "fp8_block")
GEMM_TILE_RULE_OF = {
    **{(s, "sglang_sgl_kernel_fp8_scaled_mm"): "sgl_fp8_sm90" for s in ("h100_sxm", "h200_sxm")},
    **{(s, "sglang_deepgemm_gemm_nt_f8f8bf16"): "deepgemm_sm90" for s in ("h100_sxm", "h200_sxm")},
    ("l40s", "sglang_sgl_kernel_fp8_scaled_mm"): "sgl_fp8_sm89",
    ("l40s", "CutlassFP8ScaledMMLinearKernel"): "vllm_fp8_sm89",
    **{(s, "CutlassFP8ScaledMMLinearKernel"): "vllm_fp8_sm100" for s in ("b200_sxm", "gb200")},
}
"""(system, kernel op) -> the kernel's declared tile rule (:data:`simcast.core.gemm_tiles.GEMM_TILE_RULES`):
on Hopper, sgl-kernel's CUTLASS fp8 GEMM switches its CTA tile by row count and DeepGEMM picks its block per
shape by its wave heuristic; on L40S (SM89) sgl-kernel's and vLLM's CUTLASS 2.x fp8 GEMMs switch it by M and N
bands; on B200 and GB200 (SM100) vLLM's CUTLASS fp8 GEMM by M. Other tables keep one tile (cuBLAS and
TensorRT-LLM's GEMMs are not declared here; the other Blackwell builds are not declared yet; B300 is
SM103, whose vLLM dispatch is not established here, and its table fits the SM100 rule worse: held-out p90 24.8
against 22.6 % with one grid on a 5000-row fitting sample)."""
GEMM_L2_EDGE = {"l40s", "b200_sxm", "b300_sxm", "gb200"}
"""Systems whose GEMM fits may take the capacity form of the L2 term (:attr:`simcast.core.kernel_fits.GemmFit.l2_edge`),
chosen on the fitting half: the collectors call several copies of a shape's operands in turn (ai-dynamo/aiconfigurator
``collector/sglang/collect_gemm.py``@2ec2c274 and ``collector/vllm/collect_gemm.py``@00e9bded: six, vLLM's fp8-block
one; ``collector/trtllm/collect_gemm.py``@00095909: up to five, enough to span the L2), so a call's operands stay in
L2 between repeats while the copies fit: on L40S (AD102's 96 MB L2, NVIDIA Ada architecture whitepaper, next to
864 GB/s GDDR6) SGLang's small-M bf16 GEMMs run at ~1.2-1.9 TB/s up to ~16 MiB of operands (96 MB / 6) and at
~0.65 TB/s past ~20 MiB, a step the smooth form spread over two decades. Hopper and A100 keep the smooth form
their fits were chosen with."""
