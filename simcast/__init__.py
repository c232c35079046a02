"""simcast: stage-first performance simulation of distributed LLM inference.

The public Python API, importable from here (loaded lazily, so ``import simcast``
pulls in neither torch nor pandas)::

    import simcast
    spec = simcast.SimSpec(model=simcast.load_model("meta-llama/Llama-3.1-70B"),
                           device=simcast.load_device("h100_sxm"),
                           parallel=simcast.ParallelSpec(tp=4, pp=2),
                           batch=simcast.Batch.prefill(8, 2048), num_microbatches=2)
    report = simcast.simulate(spec)

Every result is a frozen dataclass with units in its field names; tables come as
pandas DataFrames (:func:`to_dataframe`).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_API: dict[str, str] = {
    # core: specs and errors
    "SimSpec": "simcast.core.specs",
    "ParallelSpec": "simcast.core.specs",
    "Batch": "simcast.core.specs",
    "ModelSpec": "simcast.core.specs",
    "DeviceSpec": "simcast.core.specs",
    "SimcastInputError": "simcast.core.errors",
    # inputs
    "load_model": "simcast.inputs.loaders",
    "load_device": "simcast.inputs.loaders",
    # one step
    "simulate": "simcast.sim.simulate",
    "Report": "simcast.sim.simulate",
    "resolve_partition": "simcast.sim.partition",
    "simulate_partitioned": "simcast.sim.partition",
    # serving and search
    "ServingConfig": "simcast.serving.model",
    "Workload": "simcast.serving.model",
    "estimate_serving": "simcast.serving.model",
    "search": "simcast.serving.search",
    "SearchSpace": "simcast.serving.search",
    "to_dataframe": "simcast.render.search_tables",
    # disaggregated prefill/decode (docs/serving_modes.md)
    "evaluate_pools": "simcast.serving.disagg_search",
    "search_disagg": "simcast.serving.disagg_search",
    "mechanism": "simcast.serving.disagg_search",
    # speculative decoding (aggregated only): SGLang's --speculative-* flags -> SpeculativeSpec
    "from_sglang_flags": "simcast.serving.speculative",
}
__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    mod = _API.get(name)
    if mod is None:
        raise AttributeError(f"module 'simcast' has no attribute {name!r}")
    value = getattr(import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
