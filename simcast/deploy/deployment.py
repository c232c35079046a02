"""One deployment, declared once: the model, the devices, their layout (TP x PP x DP and the typed
layer :class:`~simcast.engines.partition.Partition`), the serving engine, the KV cache type and the MoE
routing skew.

The CLI, a service YAML and the one-call API each build one :class:`Deployment` (checked here), and the
step spec (:class:`~simcast.core.specs.SimSpec`), the serving config
(:class:`simcast.serving.config.ServingConfig`) and the step coster hold it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simcast.core.device import DeviceSpec
from simcast.core.errors import require
from simcast.core.model_spec import ModelSpec
from simcast.core.moe import DEFAULT_EXPERT_IMBALANCE
from simcast.core.moe_comm import MoECommFlags
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.engines import ENGINE_CHOICES, NO_ENGINE, get_engine, kernel_engine
from simcast.engines.partition import Partition

ENGINE_NAMES: tuple[str, ...] = ENGINE_CHOICES
"""``--engine`` values: the serving engines and ``none`` (no scheduler, the generic roofline kernels)."""


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """What runs where: ``model`` on ``device`` x ``parallel.world_size`` in the ``parallel`` layout,
    layers split over the stages by ``partition``, served by ``engine`` (``none``: no engine scheduler,
    the generic roofline kernels), KV cache elements of ``kv_cache_dtype`` (auto: the model's dtype) and
    MoE ``expert_imbalance`` (the busiest expert rank's load / the uniform-routing expectation) and MoE
    communication flags ``moe_comm`` (all-to-all backend, overlaps; the engine resolves what it runs)."""

    model: ModelSpec
    device: DeviceSpec
    parallel: ParallelSpec = field(default_factory=ParallelSpec)
    partition: Partition = Partition()
    engine: str = NO_ENGINE
    kv_cache_dtype: str = "auto"
    expert_imbalance: float = DEFAULT_EXPERT_IMBALANCE
    moe_comm: MoECommFlags = MoECommFlags()
    engine_settings: tuple[tuple[str, Any], ...] = ()
    """The engine's own settings given (keyword, value), sorted: SGLang's ``stream_interval``, TensorRT-LLM's
    ``cuda_graph_max_batch_size``... (:mod:`simcast.engines.flags`); the others at the engine's defaults."""
    moe_dense_tp_size: int | None = None
    """SGLang's ``--moe-dense-tp-size`` (1 or None): the engine resolves it into ``parallel.dense_ffn``."""
    enable_dp_lm_head: bool = False
    """SGLang's ``--enable-dp-lm-head``: the engine resolves it into ``parallel.lm_head``."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "partition", Partition.of(self.partition))
        require(self.engine in ENGINE_NAMES, "--engine", self.engine, f"allowed: {', '.join(ENGINE_NAMES)}")
        settings = dict(self.engine_settings)
        get_engine(self.engine).check_settings(settings)
        get_engine(self.engine).check_device(self.device)
        get_engine(self.engine).check_kv_cache_dtype(self.kv_cache_dtype, self.device)
        require(
            self.model.moe is not None or (self.moe_dense_tp_size is None and not self.enable_dp_lm_head),
            "--moe-dense-tp-size" if self.moe_dense_tp_size is not None else "--enable-dp-lm-head",
            self.moe_dense_tp_size if self.moe_dense_tp_size is not None else True,
            f"apply to MoE models with DP attention; {self.model.name} has no experts",
        )
        if self.model.moe is not None:  # where an MoE model's dense MLP layers and LM head run (DP attention)
            par = get_engine(self.engine).layer_groups(self.parallel, self.moe_dense_tp_size, self.enable_dp_lm_head)
            object.__setattr__(self, "parallel", par)
        object.__setattr__(self, "engine_settings", tuple(sorted(settings.items())))

    @classmethod
    def build(cls, *, partition: Partition | str | None = None, engine: str = NO_ENGINE, **kw: Any) -> Deployment:
        """The deployment with ``partition`` parsed (None or empty: the ``engine``'s own rule)."""
        return cls(partition=Partition.given(partition, engine), engine=engine, **kw)

    @classmethod
    def of_spec(cls, spec: SimSpec) -> Deployment:
        """The deployment a step spec runs on (its kernel engine as the engine; None: ``none``)."""
        return cls(
            model=spec.model,
            device=spec.device,
            parallel=spec.parallel,
            partition=Partition.parse(spec.partition),
            engine=spec.engine or NO_ENGINE,
            kv_cache_dtype=spec.kv_cache_dtype,
            expert_imbalance=spec.expert_imbalance,
            moe_comm=spec.moe_comm,
            engine_settings=spec.engine_settings,
        )

    @property
    def kernel_engine(self) -> str | None:
        """The engine whose fitted kernels (profile ``engines:``) cost the steps; None for ``none``."""
        return kernel_engine(self.engine)

    def sim_spec(self, batch: Batch, **step: Any) -> SimSpec:
        """The :class:`SimSpec` of one step on ``batch`` (``step``: the step's own fields, such as
        ``num_microbatches`` or ``chunked_prefill``)."""
        return SimSpec(
            model=self.model,
            device=self.device,
            parallel=self.parallel,
            batch=batch,
            partition=self.partition.text,
            engine=self.kernel_engine,
            expert_imbalance=self.expert_imbalance,
            kv_cache_dtype=self.kv_cache_dtype,
            moe_comm=self.moe_comm,
            engine_settings=self.engine_settings,
            **step,
        )


class OnDeployment:
    """The deployment's parts read through ``self.deployment``: what every object holding a
    :class:`Deployment` (the serving config, the step coster) exposes, declared once."""

    deployment: Deployment

    @property
    def model(self) -> ModelSpec:
        return self.deployment.model

    @property
    def device(self) -> DeviceSpec:
        return self.deployment.device

    @property
    def parallel(self) -> ParallelSpec:
        return self.deployment.parallel

    @property
    def partition(self) -> Partition:
        return self.deployment.partition

    @property
    def expert_imbalance(self) -> float:
        return self.deployment.expert_imbalance

    @property
    def kv_cache_dtype(self) -> str:
        return self.deployment.kv_cache_dtype

    @property
    def moe_comm(self) -> MoECommFlags:
        return self.deployment.moe_comm
