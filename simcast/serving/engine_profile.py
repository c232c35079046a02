"""Engine profile YAML: an :class:`EnginePolicy` with provenance (``calibrate-serving`` writes it,
``--engine-profile`` / the service YAML's ``engine_profile:`` read it).

```yaml
engine: vllm                          # vllm | sglang | trtllm | none
step_overhead_s: 0.003                # CPU time per step, s
per_request_overhead_s: 1.0e-05       # CPU time per request in the step, s
overhead_source: "fitted: ..."        # the label every result prints ("assumption: ..." when not fitted)
overlap_cpu: false                    # optional, and every other EnginePolicy field: default the engine's own
max_num_batched_tokens: 8192          #   on the device in use (simcast/engines/<name>.py)
...
provenance: {fitted: [step_overhead_s], files: [{name: a.json, sha256: ...}], ...}   # optional, informational
```

Unknown keys, types and ranges give one line naming the key; a field the profile leaves out takes the
engine's default on the device (and TP/PP) it is used with.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from simcast.core.device import DeviceSpec
from simcast.core.errors import require
from simcast.engines import ENGINE_CHOICES
from simcast.engines.policy import EnginePolicy, engine_policy
from simcast.engines.records import MEMORY_OF
from simcast.inputs.files import load_yaml
from simcast.inputs.limits import MAX_BATCHED_TOKENS, MAX_LATENCY_S, MAX_REQUESTS, MAX_TOKENS
from simcast.inputs.schema import Int, Num, Str, check
from simcast.serving.overhead_fit import OverheadFit, RunFit

SCHEMA: dict[str, Any] = {
    "engine": Str(64),
    "step_overhead_s": Num(0.0, MAX_LATENCY_S),
    "per_request_overhead_s": Num(0.0, MAX_LATENCY_S),
    "overhead_source": Str(),
    "overlap_cpu?": bool,
    "max_num_batched_tokens?": Int(1, MAX_BATCHED_TOKENS),
    "max_num_seqs?": Int(1, MAX_REQUESTS),
    "chunked_prefill?": bool,
    "decode_first?": bool,
    "kv_block_tokens?": Int(1, MAX_TOKENS),
    "mem_fraction?": Num(0.0, 1.0, lo_open=True),
    "mem_fraction_of?": Str(16),
    "front_end_s?": Num(0.0, MAX_LATENCY_S),
    "front_end_per_token_s?": Num(0.0, MAX_LATENCY_S),
    "front_end_source?": Str(),
    "sources?": [Str()],
    "provenance?": dict,
}
"""Types and ranges of every key (CPU times at most 1 s: simcast's bound on latencies)."""
POLICY_KEYS = tuple(k.rstrip("?") for k in SCHEMA if k.rstrip("?") not in ("engine", "provenance"))
FIELD = "engine profile"


def read_engine_profile(path: str, device: DeviceSpec, *, tp: int = 1, pp: int = 1) -> EnginePolicy:
    """The engine policy in the profile YAML at ``path``; fields it omits are the engine's defaults on
    ``device`` with ``tp``/``pp`` (:func:`engine_policy`)."""
    doc = check(load_yaml(Path(path), FIELD), SCHEMA, "")
    name = doc["engine"]
    require(name in ENGINE_CHOICES, "engine", name, f"allowed: {', '.join(ENGINE_CHOICES)}")
    if "mem_fraction_of" in doc:
        require(
            doc["mem_fraction_of"] in MEMORY_OF,
            "mem_fraction_of",
            doc["mem_fraction_of"],
            f"allowed: {', '.join(MEMORY_OF)}",
        )
    given = {k: doc[k] for k in POLICY_KEYS if k in doc}
    if "sources" in given:
        given["sources"] = tuple(given["sources"])
    return replace(engine_policy(name, device, tp=tp, pp=pp), **given)


def profile_text(policy: EnginePolicy, provenance: dict[str, Any]) -> str:
    """The YAML of ``policy`` (every field, so the profile states the whole measured engine setup) and
    ``provenance``; :func:`read_engine_profile` reads it back to an equal policy."""
    doc: dict[str, Any] = {"engine": policy.name}
    for k in POLICY_KEYS:
        v = getattr(policy, k)
        doc[k] = list(v) if isinstance(v, tuple) else v
    doc["provenance"] = provenance
    head = (
        "# simcast engine profile: the engine's scheduler limits and CPU time per step.\n"
        "# step_cpu = step_overhead_s + per_request_overhead_s * requests_in_step (seconds);\n"
        "# provenance.fitted lists the fields simcast calibrate-serving fitted; every other field is copied\n"
        "# from the defaults it started from, with the label in overhead_source.\n"
        "# Use: simcast optimize|serve-config|bench-serve --engine-profile THIS.yaml\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120)


def profile_for(
    path: str, runtime: str | None, device: DeviceSpec, *, tp: int = 1, pp: int = 1, field: str = "--engine"
) -> EnginePolicy:
    """:func:`read_engine_profile`, checked against the engine asked for (``runtime``; None: any)."""
    pol = read_engine_profile(path, device, tp=tp, pp=pp)
    require(
        runtime is None or runtime == pol.name,
        field,
        runtime,
        f"the engine profile {Path(path).name} is for engine {pol.name}; pass {field} {pol.name}",
    )
    return pol


def calibrated_policy(
    start: EnginePolicy, fit: OverheadFit, files: list[tuple[str, str]], setup: str, date: str
) -> tuple[EnginePolicy, dict[str, Any]]:
    """``start`` with the fitted overheads, its ``overhead_source`` label and the provenance block.

    ``files``: (name, sha256) of the measured files; ``setup``: model, layout and device they were measured
    on; ``date``: when the fit ran. Fields the fit did not determine keep their value and their old label.
    """
    names = [n for n, _ in files]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    values = {
        "step_overhead_s": f"{fit.step_overhead_s * 1e3:.3g} ms",
        "per_request_overhead_s": f"{fit.per_request_overhead_s * 1e6:.3g} us",
    }
    label = (
        "fitted: "
        + ", ".join(f"{k} {values[k]}" for k in fit.fitted)
        + f" by simcast calibrate-serving on {shown} ({setup}; TPOT/throughput rms error "
        f"{fit.rms_error_pct:.2f}% over {len(fit.runs)} run(s), {date})"
    )
    for k, why in fit.not_fitted:
        label += f"; {k} {values[k]} not fitted ({why}), kept: {start.overhead_source}"
    if fit.front_end_s == fit.front_end_s:  # not NaN: some run measured TTFT
        start = replace(
            start,
            front_end_s=_sig4(fit.front_end_s),
            front_end_source=f"fitted: {fit.front_end_s * 1e3:.3g} ms per request, the median TTFT residual of "
            f"{shown} after the step overheads ({setup}, {date}); "
            f"{start.front_end_per_token_s * 1e6:.3g} us per prompt token kept",
        )
    pol = replace(
        start,  # 4 significant digits: the fit is not more precise than that (values not fitted: unchanged)
        step_overhead_s=_sig4(fit.step_overhead_s) if "step_overhead_s" in fit.fitted else fit.step_overhead_s,
        per_request_overhead_s=_sig4(fit.per_request_overhead_s)
        if "per_request_overhead_s" in fit.fitted
        else fit.per_request_overhead_s,
        overhead_source=label,
    )
    prov: dict[str, Any] = {
        "tool": "simcast calibrate-serving",
        "date": date,
        "fitted": list(fit.fitted) + (["front_end_s"] if fit.front_end_s == fit.front_end_s else []),
        "not_fitted": {k: f"{why}; kept: {start.overhead_source}" for k, why in fit.not_fitted},
        "measured_on": setup,
        "files": [{"name": n, "sha256": h} for n, h in files],
        "fit": {
            "objective": "sum of squared relative errors of mean TPOT and output throughput",
            "rms_error_pct": round(fit.rms_error_pct, 4),
            "standard_error_s": {
                k: float(f"{v:.3g}")
                for k, v in (
                    ("step_overhead_s", fit.step_overhead_se_s),
                    ("per_request_overhead_s", fit.per_request_overhead_se_s),
                )
                if k in fit.fitted and v == v  # NaN: no residual left to estimate it
            },
            "evaluations": fit.evaluations,
            "runs": [_run_row(r) for r in fit.runs],
        },
    }
    return pol, prov


def _sig4(x: float) -> float:
    return float(f"{x:.4g}")


def _run_row(r: RunFit) -> dict[str, Any]:
    row: dict[str, Any] = {"source": r.run.source, "method": r.predicted.method}
    for metric, meas, pred, unit in (
        ("tpot_ms", r.run.tpot_s, r.predicted.tpot_s, 1e3),
        ("output_throughput", r.run.output_tokens_per_s, r.predicted.output_tokens_per_s, 1.0),
        ("ttft_ms", r.run.ttft_s, r.predicted.ttft_s, 1e3),
    ):
        if meas is not None:
            row[metric] = {"measured": round(meas * unit, 6), "predicted": round(pred * unit, 6)}
    return row
