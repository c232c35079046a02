"""Per-pool launch commands of a disaggregated deployment (``optimize --serving-mode disagg --emit ...``).

Each pool's server line is the aggregated one (:func:`simcast.render.launch.launch_lines`: layout,
limits, memory flag) plus the engine's disaggregation flags, read from the engines' own code and docs:

* vLLM: ``--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'`` on both pools
  (``docs/features/nixl_connector_usage.md``; the decode instance reads the prefill's blocks); requests
  go through a proxy that sends each prompt to a prefill instance first (the toy proxy of
  ``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py``).
* SGLang: ``--disaggregation-mode prefill|decode`` and ``--disaggregation-transfer-backend mooncake|nixl``
  (``python/sglang/srt/server_args.py``; ``docs/advanced_features/pd_disaggregation.md``: "we support
  Mooncake and NIXL as the transfer engine"), behind ``python -m sglang_router.launch_router
  --pd-disaggregation --prefill URL --decode URL`` (same page).
* NVIDIA Dynamo with the vLLM backend: ``python -m dynamo.frontend`` and ``python -m dynamo.vllm`` workers
  with ``--is-prefill-worker`` / ``--is-decode-worker`` (ai-dynamo/dynamo
  ``components/src/dynamo/vllm/backend_args.py`` @036f289), each with vLLM's own engine flags and the
  NixlConnector transfer config.
"""

from __future__ import annotations

import shlex

from simcast.render.launch import LaunchLines, command_line, launch_lines
from simcast.serving.disagg import DisaggResult

NIXL_CONFIG = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
SGLANG_ROUTER_PORT = 8000


def _pool(r: DisaggResult, role: str, engine: str, transfer_backend: str) -> str:
    c = r.config
    cfg = c.prefill if role == "prefill" else c.decode
    batch = r.prefill.prompts_per_step if role == "prefill" else r.decode.concurrency
    base = "vllm" if engine == "dynamo" else engine
    line = launch_lines(cfg, base, batch * cfg.parallel.dp).server
    if engine == "vllm":
        return line + " " + command_line(["--kv-transfer-config", NIXL_CONFIG])
    if engine == "sglang":
        extra = ["--disaggregation-mode", role, "--disaggregation-transfer-backend", transfer_backend]
        return line + " " + command_line(extra)
    head = f"vllm serve {shlex.quote(cfg.model.name)}"
    rest = line[len(head) :] if line.startswith(head) else line
    worker = ["python", "-m", "dynamo.vllm", "--model", cfg.model.name, f"--is-{role}-worker"]
    return command_line(worker) + rest + " " + command_line(["--kv-transfer-config", NIXL_CONFIG])


def disagg_launch(r: DisaggResult, engine: str, transfer_backend: str = "mooncake") -> LaunchLines:
    """Prefill and decode server lines (one of each; start ``x`` and ``y`` copies), the router and the bench."""
    c = r.config
    pre = _pool(r, "prefill", engine, transfer_backend)
    dec = _pool(r, "decode", engine, transfer_backend)
    notes = [f"start {c.prefill_replicas} prefill and {c.decode_replicas} decode instance(s) ({c.label})"]
    if engine == "sglang":
        router = command_line(
            [
                "python",
                "-m",
                "sglang_router.launch_router",
                "--pd-disaggregation",
                "--prefill",
                "http://PREFILL_HOST:30000",
            ]
            + ["--decode", "http://DECODE_HOST:30000", "--port", SGLANG_ROUTER_PORT]
        )
    elif engine == "dynamo":
        router = command_line(["python", "-m", "dynamo.frontend"])
    else:
        router = "# route each request to a prefill instance, then a decode instance (vLLM's toy_proxy_server.py)"
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
