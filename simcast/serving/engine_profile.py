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
