"""The draft of speculative decoding: its shape, its memory on the last stage, its time per step.

**Shape** (:func:`draft_model`): the draft is costed as a one-layer model traced by the same stage-local
tracer as the target (embedding lookup, one decoder layer with its attention over the context, final
norm, lm_head, sampler), TP-sharded like the target, on the last PP stage (vLLM and SGLang run the
proposer on the rank that samples):

* **MTP**: the target's own extra layer(s) (``num_nextn_predict_layers``): a layer of the target's last
  layer's structure (MLA and MoE for DeepSeek-V3), plus ``eh_proj`` (2h -> h) fusing the token embedding
  with the previous hidden state. With ``k`` above the layers present the layer is run again for each
  token (vLLM's MTP proposer reuses it; SGLang's NEXTN runs ``num_steps`` passes).
* **EAGLE**: one dense decoder layer of the target's width (Llama layout) plus the fc (2h -> h) fusing
  the embedding with the target's hidden state; embedding and lm_head shared with the target (vLLM
  shares them when they are equal: ``vllm/v1/spec_decode/eagle.py``).
* **EAGLE-3**: the layer, an fc (3h -> h) fusing three of the target's hidden states (once per step), a
  2h-wide QKV input (the extra ``h`` columns are costed as one more GEMM per pass) and its own lm_head
  and norm; the lm_head is taken at the target's vocabulary (published heads may use a smaller draft
  vocabulary: not modelled).
* **n-gram**: no draft model; CPU time per request per step
  (:data:`~simcast.serving.speculative.spec.NGRAM_CPU_S_PER_REQUEST`, an assumption), serial with the GPU.

The fc GEMMs run on the device's generic roofline (not an engine-fitted GEMM): labelled.

**Memory**: the draft's weights on one rank of the last stage (the layer TP-sharded, the fc replicated)
and its KV: one layer's K and V (MLA: the latent) per token of every running request.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from simcast.core.device import DeviceSpec
from simcast.core.kv import kv_dtype_bytes
from simcast.core.memory import kv_bytes_per_token, layer_weight_bytes
from simcast.core.model_spec import ModelSpec
from simcast.core.shards import sharded_dims
from simcast.core.specs import Batch, ParallelSpec
from simcast.core.weights import layer_weight_bytes_at
from simcast.cost.ops.compute import OpWork, roofline
from simcast.engines.partition import Partition
from simcast.serving.speculative.spec import NGRAM_CPU_S_PER_REQUEST, SpeculativeSpec
from simcast.serving.step import StepCoster

FC_NOTE = "the draft's fc GEMMs (fusing hidden states) on the device's generic roofline, not an engine fit"


def draft_model(model: ModelSpec, spec: SpeculativeSpec) -> ModelSpec | None:
    """The draft as a one-layer :class:`ModelSpec` (module docstring); None for n-gram."""
    if spec.method == "ngram":
        return None
    if spec.method == "mtp":
        last = model.num_layers - 1
        moe = model.moe
        if moe is not None:  # the MTP layer has the structure of the target's last layer
            moe = replace(moe, first_k_dense=0) if model.is_moe_layer(last) else None
        return replace(
            model,
            name=f"{model.name} MTP layer",
            num_layers=1,
            moe=moe,
            layer_types=model.layer_types[-1:] if model.layer_types else (),
            num_mtp_layers=0,
        )
    return replace(
        model,
        name=f"{model.name} {spec.method} head",
        num_layers=1,
        moe=None,
        mla=None,
        quant=None,
        layer_types=(),
        sliding_window=0,
        attention_sinks=False,
        o_proj_bias=False,
        num_mtp_layers=0,
    )


def draft_parallel(par: ParallelSpec) -> ParallelSpec:
    """The draft's layout: one stage (the target's last) with the target's TP, EP and replicas."""
    return replace(par, pp=1, world_size=0)


def fc_shapes(model: ModelSpec, spec: SpeculativeSpec, tp: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(per draft pass, once per step) extra GEMMs as (N, K) weight shapes, rows = the drafting requests."""
    h = model.hidden_size
    if spec.method in ("mtp", "eagle"):
        return [(h, 2 * h)], []
    if spec.method == "eagle3":
        sd = sharded_dims(model, tp)
        return [(sd.qkv_width, h)], [(h, 3 * h)]
    return [], []


def draft_weight_bytes(model: ModelSpec, spec: SpeculativeSpec, par: ParallelSpec) -> int:
    """The draft's weights on one rank of the last stage (bytes)."""
    d = draft_model(model, spec)
    if d is None:
        return 0
    sd = sharded_dims(d, par.tp)
    dpar = draft_parallel(par)
    if d.moe is not None or d.mla is not None or d.quant is not None or d.o_proj_bias:
        layer = int(layer_weight_bytes_at(d, sd, dpar, 0))
    else:
        layer = layer_weight_bytes(d, sd)
    b, h = d.dtype_bytes, d.hidden_size
    per_pass, once = fc_shapes(model, spec, par.tp)
    fc = sum(n * k for n, k in per_pass + once) * b  # replicated on every TP rank
    extra = 0
    if spec.method == "mtp":  # enorm, hnorm and the shared head's norm
        extra = 3 * h * b
    elif spec.method == "eagle3":  # its own final norm and lm_head (vocab-parallel)
        extra = h * b + sd.vocab_shard * h * b
    return layer + fc + extra


def draft_kv_bytes_per_token(model: ModelSpec, spec: SpeculativeSpec, tp: int, kv_cache_dtype: str = "auto") -> int:
    """KV bytes the draft adds per cached token on one rank of the last stage (one layer; an FP4 cache's
    0.5625 bytes per element give whole bytes for every width that is a multiple of its 16-value scale block)."""
    d = draft_model(model, spec)
    if d is None:
        return 0
    return int(kv_bytes_per_token(d, sharded_dims(d, tp), 1, kv_dtype_bytes(d, kv_cache_dtype)))


@dataclass(kw_only=True)
class DraftCoster:
    """Seconds the draft adds to the last stage of a step with ``n`` drafting requests at context ``ctx``:
    ``k`` sequential passes of the one-layer draft (batch ``n``, 1 token each) plus its fc GEMMs; n-gram:
    ``n`` times the CPU lookup. Memoised by (n, ctx)."""

    spec: SpeculativeSpec
    model: ModelSpec  # the target
    device: DeviceSpec
    coster: StepCoster | None  # the draft's one-stage layout (None: n-gram)
    _memo: dict[tuple[int, int], float] = field(default_factory=dict, repr=False)

    def __call__(self, n: int, ctx: int) -> float:
        if n <= 0:
            return 0.0
        if self.coster is None:
            return n * NGRAM_CPU_S_PER_REQUEST
        key = (n, max(1, ctx))
        if key not in self._memo:
            self.prefetch([key])
        return self._memo[key]

    def prefetch(self, pairs: list[tuple[int, int]]) -> None:
        """Cost the draft for each (requests, context) of ``pairs`` now, the new ones in one pass."""
        if self.coster is None:
            return
        new = list(dict.fromkeys((n, max(1, c)) for n, c in pairs if n > 0 and (n, max(1, c)) not in self._memo))
        if not new:
            return
        per_pass, once = fc_shapes(self.model, self.spec, self.coster.parallel.tp)
        if self.spec.widths and max(self.spec.widths) > 1:  # a tree: pass i drafts widths[i] tokens per request
            self._prefetch_tree(new, per_pass, once)
            return
        times = self.coster.stage_times_many([Batch.decode(n, c) for n, c in new])
        for (n, c), t in zip(new, times):
            s = self.spec.k * (t[0] + sum(self._gemm_s(n, nn, k) for nn, k in per_pass))
            self._memo[(n, c)] = s + sum(self._gemm_s(n, nn, k) for nn, k in once)

    def _prefetch_tree(self, new: list[tuple[int, int]], per_pass: list, once: list) -> None:
        """A draft tree's passes: pass ``i`` runs ``widths[i]`` tokens per request, each branch costed as a
        request of its own at the context (its KV read again per branch: an upper bound, the branches share
        the prefix)."""
        assert self.coster is not None
        widths = self.spec.widths
        keys = sorted({(n * w, c) for n, c in new for w in widths})
        times = dict(zip(keys, self.coster.stage_times_many([Batch.decode(m, c) for m, c in keys])))
        for n, c in new:
            s = sum(times[(n * w, c)][0] + sum(self._gemm_s(n * w, nn, k) for nn, k in per_pass) for w in widths)
            self._memo[(n, c)] = s + sum(self._gemm_s(n, nn, k) for nn, k in once)

    def _gemm_s(self, m: int, n: int, k: int) -> float:
        dt, b = self.model.dtype, self.model.dtype_bytes
        nbytes = float(b * (m * k + n * k) + b * m * n)  # activations and weight read once, output written once
        work = OpWork(flops=2.0 * m * n * k, bytes=nbytes, unit="cube", mnk=(m, n, k))
        return roofline(work, self.device, dt)[0]


def draft_coster(target: StepCoster, spec: SpeculativeSpec) -> DraftCoster:
    """The :class:`DraftCoster` of ``spec`` on ``target``'s layout, engine and kernels."""
    d = draft_model(target.model, spec)
    coster = None
    if d is not None:
        coster = StepCoster(
            deployment=replace(
                target.deployment,
                model=d,
                parallel=draft_parallel(target.parallel),
                partition=Partition.parse("uniform"),
            ),
            policy=target.policy,
            use_disk_cache=target.use_disk_cache,
        )
    return DraftCoster(spec=spec, model=target.model, device=target.device, coster=coster)
