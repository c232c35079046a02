"""Write simcast/data/traces/: the stage traces of the shipped models' default searches, compiled ahead of time.

Each shipped model is searched as the demo searches Llama-3.1-70B (``simcast optimize`` with the flags of
``simcast.api.search_inputs.DEMO_SEARCH``, ``--workers 1`` and the model) with shipped traces off and an
empty trace cache, so every stage-local module the search needs is traced with ``torch.compile`` exactly
as a first run traces it; the cache entries it writes are then copied unchanged (same JSON, same SHA-256)
next to a ``manifest.json`` naming the torch release, the trace format and the SHA-256 of the tracer's
sources. simcast uses them only while all three match (``simcast.trace.cache.shipped_usable``); otherwise
it compiles, as without them. tests/trace/test_shipped_traces.py fails when the tracer changed since they were
built and recompiles a sample to check they are what the tracer writes.

Run: .venv/bin/python scripts/build_shipped_traces.py [MODEL ...]   (default: every shipped model)
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    os.environ["SIMCAST_SHIPPED_TRACES"] = "0"  # trace everything anew
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SIMCAST_CACHE_DIR"] = tmp
        from simcast.api.search_inputs import demo_flags
        from simcast.cli.main import main as cli_main
        from simcast.inputs.catalog import list_models
        from simcast.trace import cache

        models = sys.argv[1:] or [m.name for m in list_models()]
        search = ["optimize", *demo_flags(), "--workers", "1"]
        for name in models:
            t = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                rc = cli_main([*search, name])
            print(f"{name}: exit {rc}, {time.perf_counter() - t:.1f} s", flush=True)
        entries = sorted(cache.cache_dir().glob("*.json"))
        out = cache.SHIPPED_DIR
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for e in entries:
            shutil.copyfile(e, out / e.name)
        manifest = {
            "format": cache.TRACE_FORMAT,
            "torch": cache.public_version(cache._torch_version()),
            "tracer_sha256": cache.tracer_sha256(),
            "entries": len(entries),
            "built_by": "scripts/build_shipped_traces.py",
            "searches": [" ".join(["simcast", *search, m]) for m in models],
        }
        (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        size = sum(p.stat().st_size for p in out.iterdir())
        print(f"wrote {len(entries)} traces ({size / 1e6:.2f} MB) to {out.relative_to(Path.cwd())}")


if __name__ == "__main__":
    main()
