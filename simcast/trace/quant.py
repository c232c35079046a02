"""Linear layers whose weights may be quantised: ``linear`` or the ``quant_linear`` leaf op.

``quant_linear``: a GEMM with fp8 block-scaled or mxfp4 weights (only a fake kernel, like
:mod:`simcast.trace.ops`). Importing this module imports torch.
"""

from __future__ import annotations

import torch
from torch import nn

from simcast.trace.ops import _LIB
from simcast.trace.ops import no_kernel as _no_kernel


@torch.library.custom_op(f"{_LIB}::quant_linear", mutates_args=())
def quant_linear(x: torch.Tensor, weight: torch.Tensor, fmt: str) -> torch.Tensor:
    """x (..., K) @ weight (N, K)^T with weights stored in ``fmt``; output in x's dtype."""
    _no_kernel()


@quant_linear.register_fake
def _(x, weight, fmt):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


class Linear(nn.Module):
    """``nn.Linear`` (traced as ``linear``) or, with a quantised ``fmt``, ``quant_linear``."""

    def __init__(self, n_in: int, n_out: int, bias: bool, fmt: str, **mk) -> None:
        super().__init__()
        self.fmt = fmt
        self.lin = nn.Linear(n_in, n_out, bias=bias, **mk) if not fmt else None
        self.weight = nn.Parameter(torch.empty(n_out, n_in, **mk)) if fmt else None

    def forward(self, x):
        return self.lin(x) if self.lin is not None else quant_linear(x, self.weight, self.fmt)
