"""simcast: stage-first performance simulation of distributed LLM inference.

The public Python API, importable from here (loaded lazily, so ``import simcast`` pulls in neither
torch nor pandas). Notebooks and scripts import only ``simcast``.

**One calls** (the CLI's commands run exactly these; a model or device is a shipped name, a file path,
or a spec object)::

    import simcast
    step = simcast.simulate_step(model="meta-llama/Llama-3.1-70B", device="h100_sxm", tp=4, pp=2,
                                 batch_size=8, input_length=2048, microbatches=2)      # simcast simulate
    found = simcast.optimize(model="meta-llama/Llama-3.1-70B", device="h100_sxm", num_devices=8,
                             input_length=2048, output_length=512, tpot_limit_ms=50)   # simcast optimize
    run = simcast.bench_serve(model="meta-llama/Llama-3.1-8B", device="h100_sxm", num_prompts=200,
                              request_rate=10, input_length=1024, output_length=128)   # simcast bench-serve

- ``simulate_step`` -> ``StepReport`` (a ``Report``): one forward step, seconds and bytes.
- ``optimize`` -> ``SearchResult``: ``rows`` (``SearchRow``: ``ttft_ms``, ``tpot_ms``, ``tokens_per_s``,
  ``max_stage_weights_gib``, ...), ``best()``, ``rejected``, ``candidates`` (the serving results).
- ``bench_serve`` -> ``BenchResult``: ``summary`` (typed metrics), ``metrics`` (``vllm bench serve``'s keys), ``run``
  (per request).

Each call's keywords are the fields of its options dataclass (``StepOptions``, ``SearchOptions``,
``BenchOptions``: default and a one-line doc each, ``help(simcast.simulate_step)`` lists them).

Every result has ``to_dict()`` (the CLI's ``--json``/``--save-result`` form) and ``to_dataframe()``
(columns named with their units: ``_ms``, ``_s``, ``_gib``, ``tokens_per_s``).

**Specs and inputs**: ``ModelSpec``, ``DeviceSpec``, ``ParallelSpec``, ``Partition`` (layers per
stage, parsed once), ``Deployment`` (model, devices, layout, partition, engine), ``Batch``, ``SimSpec``,
``FabricChoice``; ``load_model``, ``load_device``, ``shipped_models``, ``shipped_devices``,
``load_distribution`` (the shipped request-length distributions); ``SimcastInputError`` (bad input).

**One step, lower level**: ``simulate`` (a ``SimSpec`` as given), ``simulate_partitioned`` (resolves
cost-driven partitions such as ``"balanced"``), ``resolve_partition``, ``report_timeline`` (the
event-level pipeline timeline).

**Serving, lower level**: ``ServingConfig``, ``Workload``, ``estimate_serving`` (steady state of one
configuration), ``max_batch_for_memory``, ``kv_capacity_tokens``; ``search``, ``SearchSpace``.

**Rendering**: ``format_report`` (the text report), ``breakdown_line`` (the RFC's ``Mem | Comm | Cube |
Vec | PP Compute | PP Comm | PP Bubble`` line of a step), ``to_dataframe`` (ranked search rows),
``plot_stage_breakdown``, ``plot_gantt``, ``plot_stage_memory``, ``plot_report``, ``new_figure``,
``plot_pareto``, ``plot_bench``, ``chrome_trace`` (a Perfetto/chrome://tracing JSON of a step),
``report_html`` / ``render_html`` (any of the calls' results as one self-contained HTML page).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# every public name typed for mypy (a misspelt keyword of a one-call is an error); loaded lazily at run time
if TYPE_CHECKING:
    from simcast.api.bench import BenchOptions as BenchOptions
    from simcast.api.bench import BenchResult as BenchResult
    from simcast.api.bench import bench_serve as bench_serve
    from simcast.api.optimize import SearchResult as SearchResult
    from simcast.api.optimize import SearchRow as SearchRow
    from simcast.api.optimize import optimize as optimize
    from simcast.api.report import render_html as render_html
    from simcast.api.report import report_html as report_html
    from simcast.api.search_inputs import SearchOptions as SearchOptions
    from simcast.api.step import StepOptions as StepOptions
    from simcast.api.step import StepReport as StepReport
    from simcast.api.step import simulate_step as simulate_step
    from simcast.core.device import DeviceSpec as DeviceSpec
    from simcast.core.errors import SimcastInputError as SimcastInputError
    from simcast.core.fabrics import FabricChoice as FabricChoice
    from simcast.core.model_spec import ModelSpec as ModelSpec
    from simcast.core.specs import Batch as Batch
    from simcast.core.specs import ParallelSpec as ParallelSpec
    from simcast.core.specs import SimSpec as SimSpec
    from simcast.deploy.deployment import Deployment as Deployment
    from simcast.engines.partition import Partition as Partition
    from simcast.inputs.loaders import load_device as load_device
    from simcast.inputs.loaders import load_model as load_model
    from simcast.inputs.loaders import shipped_devices as shipped_devices
    from simcast.inputs.loaders import shipped_models as shipped_models
    from simcast.inputs.workloads import load_distribution as load_distribution
    from simcast.render.bench_plots import plot_bench as plot_bench
    from simcast.render.breakdown import breakdown_line as breakdown_line
    from simcast.render.chrome_trace import chrome_trace as chrome_trace
    from simcast.render.pareto_plot import plot_pareto as plot_pareto
    from simcast.render.plots import new_figure as new_figure
    from simcast.render.plots import plot_gantt as plot_gantt
    from simcast.render.plots import plot_report as plot_report
    from simcast.render.plots import plot_stage_breakdown as plot_stage_breakdown
    from simcast.render.plots import plot_stage_memory as plot_stage_memory
    from simcast.render.search_tables import to_dataframe as to_dataframe
    from simcast.render.tables import format_report as format_report
    from simcast.serving.disagg.search import evaluate_pools as evaluate_pools
    from simcast.serving.disagg.search import mechanism as mechanism
    from simcast.serving.disagg.search import search_disagg as search_disagg
    from simcast.serving.search.layouts import SearchSpace as SearchSpace
    from simcast.serving.search.layouts import search as search
    from simcast.serving.speculative.spec import from_sglang_flags as from_sglang_flags
    from simcast.serving.steady.model import ServingConfig as ServingConfig
    from simcast.serving.steady.model import Workload as Workload
    from simcast.serving.steady.model import estimate_serving as estimate_serving
    from simcast.serving.steady.model import kv_capacity_tokens as kv_capacity_tokens
    from simcast.serving.steady.model import max_batch_for_memory as max_batch_for_memory
    from simcast.sim.partition import resolve_partition as resolve_partition
    from simcast.sim.partition import simulate_partitioned as simulate_partitioned
    from simcast.sim.simulate import Report as Report
    from simcast.sim.simulate import simulate as simulate
    from simcast.sim.timeline import report_timeline as report_timeline

from simcast.core.version import VERSION as __version__

_API: dict[str, str] = {
    # one calls and their results
    "simulate_step": "simcast.api.step",
    "StepReport": "simcast.api.step",
    "optimize": "simcast.api.optimize",
    "SearchResult": "simcast.api.optimize",
    "SearchRow": "simcast.api.optimize",
    "bench_serve": "simcast.api.bench",
    "BenchResult": "simcast.api.bench",
    # each one-call's keywords as one object (the call's signature is its fields)
    "StepOptions": "simcast.api.step",
    "SearchOptions": "simcast.api.search_inputs",
    "BenchOptions": "simcast.api.bench",
    # core: specs and errors
    "SimSpec": "simcast.core.specs",
    "ParallelSpec": "simcast.core.specs",
    "Partition": "simcast.engines.partition",
    "Deployment": "simcast.deploy.deployment",
    "Batch": "simcast.core.specs",
    "ModelSpec": "simcast.core.model_spec",
    "DeviceSpec": "simcast.core.device",
    "FabricChoice": "simcast.core.fabrics",
    "SimcastInputError": "simcast.core.errors",
    # inputs
    "load_model": "simcast.inputs.loaders",
    "load_device": "simcast.inputs.loaders",
    "shipped_models": "simcast.inputs.loaders",
    "shipped_devices": "simcast.inputs.loaders",
    "load_distribution": "simcast.inputs.workloads",
    # one step
    "simulate": "simcast.sim.simulate",
    "Report": "simcast.sim.simulate",
    "resolve_partition": "simcast.sim.partition",
    "simulate_partitioned": "simcast.sim.partition",
    "report_timeline": "simcast.sim.timeline",
    # serving and search
    "ServingConfig": "simcast.serving.steady.model",
    "Workload": "simcast.serving.steady.model",
    "estimate_serving": "simcast.serving.steady.model",
    "max_batch_for_memory": "simcast.serving.steady.model",
    "kv_capacity_tokens": "simcast.serving.steady.model",
    "search": "simcast.serving.search.layouts",
    "SearchSpace": "simcast.serving.search.layouts",
    # rendering
    "format_report": "simcast.render.tables",
    "breakdown_line": "simcast.render.breakdown",
    "to_dataframe": "simcast.render.search_tables",
    "plot_stage_breakdown": "simcast.render.plots",
    "plot_gantt": "simcast.render.plots",
    "plot_stage_memory": "simcast.render.plots",
    "plot_report": "simcast.render.plots",
    "new_figure": "simcast.render.plots",
    "plot_pareto": "simcast.render.pareto_plot",
    "plot_bench": "simcast.render.bench_plots",
    "chrome_trace": "simcast.render.chrome_trace",
    "report_html": "simcast.api.report",
    "render_html": "simcast.api.report",
    # disaggregated prefill/decode (docs/serving_modes.md)
    "evaluate_pools": "simcast.serving.disagg.search",
    "search_disagg": "simcast.serving.disagg.search",
    "mechanism": "simcast.serving.disagg.search",
    # speculative decoding (aggregated only): SGLang's --speculative-* flags -> SpeculativeSpec
    "from_sglang_flags": "simcast.serving.speculative.spec",
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
