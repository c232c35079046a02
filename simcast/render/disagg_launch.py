"""Per-pool launch commands of a disaggregated deployment (``optimize --serving-mode disagg --emit ...``).

Each pool's server line is the aggregated one (:func:`simcast.render.launch.launch_lines`: layout,
limits, memory flag) plus the engine's disaggregation flags and router
(:meth:`simcast.engines.base.Engine.disagg_flags`, :meth:`~simcast.engines.base.Engine.disagg_router`, read
from the engines' own code and docs), or:

* NVIDIA Dynamo with the vLLM backend: ``python -m dynamo.frontend`` and ``python -m dynamo.vllm`` workers
  with ``--is-prefill-worker`` / ``--is-decode-worker`` (ai-dynamo/dynamo
  ``components/src/dynamo/vllm/backend_args.py`` @036f289), each with vLLM's own engine flags and the
  NixlConnector transfer config.
"""

from __future__ import annotations

import shlex

from simcast.engines import get_engine
from simcast.engines.launch import command_line
from simcast.engines.vllm import ENGINE as VLLM
from simcast.render.launch import LaunchLines, launch_lines
from simcast.serving.disagg.steady import DisaggResult

DYNAMO = "dynamo"
"""``--emit dynamo``: NVIDIA Dynamo's launcher over vLLM workers (a launcher, not an engine)."""


def _pool(r: DisaggResult, role: str, engine: str, transfer_backend: str) -> str:
    c = r.config
    cfg = c.prefill if role == "prefill" else c.decode
    batch = r.prefill.prompts_per_step if role == "prefill" else r.decode.concurrency
    base = VLLM.name if engine == DYNAMO else engine
    line = launch_lines(cfg, base, batch * cfg.parallel.dp).server
    if engine != DYNAMO:
        return line + " " + command_line(get_engine(engine).disagg_flags(role, transfer_backend))
    head = f"vllm serve {shlex.quote(cfg.model.name)}"
    rest = line[len(head) :] if line.startswith(head) else line
    worker = ["python", "-m", "dynamo.vllm", "--model", cfg.model.name, f"--is-{role}-worker"]
    return command_line(worker) + rest + " " + command_line(VLLM.disagg_flags(role, transfer_backend))


def disagg_launch(r: DisaggResult, engine: str, transfer_backend: str = "mooncake") -> LaunchLines:
    """Prefill and decode server lines (one of each; start ``x`` and ``y`` copies), the router and the bench."""
    c = r.config
    pre = _pool(r, "prefill", engine, transfer_backend)
    dec = _pool(r, "decode", engine, transfer_backend)
    notes = [f"start {c.prefill_replicas} prefill and {c.decode_replicas} decode instance(s) ({c.label})"]
    router = (
        command_line(["python", "-m", "dynamo.frontend"]) if engine == DYNAMO else get_engine(engine).disagg_router()
    )
    w = c.decode.workload
    conc = max(1, round(r.decode.concurrency * c.decode_replicas * c.decode.parallel.dp))
    bench = command_line(
        ["vllm", "bench", "serve", "--model", c.decode.model.name, "--dataset-name", "random"]
        + ["--random-input-len", w.input_length, "--random-output-len", w.output_length]
        + ["--num-prompts", max(1000, 10 * conc), "--request-rate", f"{r.request_rate_per_s:.4g}"]
    )
    return LaunchLines(
        commands=(("prefill pool", pre), ("decode pool", dec), ("router", router)), bench=bench, notes=tuple(notes)
    )
