"""Gated DeltaNet linear attention (Qwen3-Next): the frozen sub-spec, its parameters and its recurrent state.

A linear-attention layer keeps no per-token KV cache: each request holds a constant state per layer, the
short-convolution window ``(conv_kernel - 1) x conv_dim`` and the recurrent state ``num_v_heads x d_k x d_v``
(transformers ``modeling_qwen3_next.py`` ``Qwen3NextGatedDeltaNet``; vLLM ``qwen3_next.py`` and
``MambaStateShapeCalculator.gated_delta_net_state_shape``). Element counts; bytes per element are given.
Constructors validate and never touch files.
"""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.errors import require

SSM_STATE_BYTES = 4
"""Bytes per recurrent-state element: fp32. SGLang's ``--mamba-ssm-dtype`` default is float32 and the fla kernels
keep the final state in fp32 (``final_state = k.new_empty(N, H, K, V, dtype=torch.float32)`` in
``chunk_delta_h.py``); vLLM's ``mamba_ssm_cache_dtype`` "auto" stores the model dtype instead (half of this)."""


@dataclass(frozen=True, kw_only=True)
class LinearAttentionSpec:
    """One Gated DeltaNet layer's shape (unsharded): ``num_k_heads`` query/key heads of ``k_head_dim``,
    ``num_v_heads`` value heads of ``v_head_dim`` (each value head has its own ``d_k x d_v`` state), a causal
    depthwise convolution of ``conv_kernel`` taps over q, k and v."""

    num_k_heads: int
    num_v_heads: int
    k_head_dim: int
    v_head_dim: int
    conv_kernel: int

    def __post_init__(self) -> None:
        for f in ("num_k_heads", "num_v_heads", "k_head_dim", "v_head_dim", "conv_kernel"):
            v = getattr(self, f)
            require(isinstance(v, int) and v > 0, f"model.linear.{f}", v, "a positive integer is required")
        require(
            self.num_v_heads % self.num_k_heads == 0,
            "model.linear.num_v_heads",
            self.num_v_heads,
            f"must be a multiple of linear_num_key_heads={self.num_k_heads}",
        )

    @property
    def key_dim(self) -> int:
        return self.num_k_heads * self.k_head_dim

    @property
    def value_dim(self) -> int:
        return self.num_v_heads * self.v_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the short convolution: q, k and v."""
        return 2 * self.key_dim + self.value_dim

    def params(self, hidden: int) -> int:
        """One layer's parameters: in_proj_qkvz (q, k, v, z), in_proj_ba (b, a), conv1d (no bias), dt_bias and
        A_log per value head, the gated RMSNorm over ``v_head_dim``, out_proj."""
        qkvz = hidden * (2 * self.key_dim + 2 * self.value_dim)
        ba = hidden * 2 * self.num_v_heads
        return (
            qkvz
            + ba
            + self.conv_dim * self.conv_kernel
            + 2 * self.num_v_heads
            + self.v_head_dim
            + self.value_dim * hidden
        )

    def state_bytes(self, tp: int, dtype_bytes: int) -> int:
        """State one request holds in one layer on one TP rank: the conv window in the model dtype and the
        recurrent state at :data:`SSM_STATE_BYTES` (heads split ``/ tp``)."""
        conv = (self.conv_kernel - 1) * (self.conv_dim // tp) * dtype_bytes
        ssm = (self.num_v_heads // tp) * self.k_head_dim * self.v_head_dim * SSM_STATE_BYTES
        return conv + ssm
