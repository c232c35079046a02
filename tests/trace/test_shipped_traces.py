"""Shipped stage traces (simcast/data/traces): current, verified, what the tracer writes, and a fallback
to compiling whenever they do not apply (issue 15: the first run without compiling)."""

from __future__ import annotations

import json
import shutil

import pytest

from simcast.core.specs import ParallelSpec
from simcast.sim.simulate import stage_keys
from simcast.trace import cache as tr
from simcast.trace import tracer
from simcast.trace.ir import StageTrace
from simcast.trace.key import StageKey

ENTRIES = sorted(p for p in tr.SHIPPED_DIR.glob("*.json") if p.name != "manifest.json")
REBUILD = "rebuild them: python scripts/build_shipped_traces.py"


def _manifest() -> dict:
    return json.loads((tr.SHIPPED_DIR / "manifest.json").read_text())


def _key(d: dict) -> StageKey:
    return StageKey(**{k: tuple(v) if isinstance(v, list) else v for k, v in d["key"].items()})


def _same_torch() -> bool:
    return _manifest()["torch"] == tr.public_version(tr._torch_version())


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty disk cache, an empty memory cache, shipped traces on; the list of keys compiled."""
    monkeypatch.setenv("SIMCAST_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SIMCAST_SHIPPED_TRACES", raising=False)
    compiled: list[StageKey] = []

    def counting(key):  # no torch here: a compile is only counted
        compiled.append(key)
        return StageTrace(key=key, ops=(), compiled=True)

    monkeypatch.setattr(tracer, "compile_trace", counting)
    tr.clear_memory_cache()
    tr.shipped_usable.cache_clear()
    yield compiled
    tr.clear_memory_cache()
    tr.shipped_usable.cache_clear()


def test_manifest_names_the_current_tracer_and_format():
    m = _manifest()
    assert m["format"] == tr.TRACE_FORMAT, REBUILD
    assert m["tracer_sha256"] == tr.tracer_sha256(), f"the tracer's sources changed since the shipped traces: {REBUILD}"
    assert m["entries"] == len(ENTRIES) > 0


def test_every_shipped_entry_verifies_under_its_own_key():
    for p in ENTRIES:
        d = json.loads(p.read_text())
        key = _key(d)
        assert p.stem == tr._key_hash(key)
        assert tr.verify_entry(d, key).ops  # checksum, key, op names, shapes: as a disk-cache entry


def test_the_demo_search_is_shipped(llama70b):
    """Every stage key the demo (Llama-3.1-70B, tp x pp in {1,2,4,8}^2 on 8 devices) asks for has an entry
    (tp 1 x pp 1 holds 141 GB of weights on one 80 GB device: the search rejects it before tracing)."""
    names = {p.name for p in ENTRIES}
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8):
            if 2 <= tp * pp <= 8:
                for key in stage_keys(llama70b, ParallelSpec(tp=tp, pp=pp, world_size=tp * pp), "vllm"):
                    assert f"{tr._key_hash(key)}.json" in names, (tp, pp)


@pytest.mark.slow
def test_shipped_entries_are_what_the_tracer_writes_now():
    """Two entries (the smallest, and one with embedding and head) compiled anew: byte-identical JSON."""
    if not _same_torch():
        pytest.skip("shipped traces were built with another torch release; they are not used here")
    docs = [json.loads(p.read_text()) for p in ENTRIES]
    small = min(docs, key=lambda d: len(d["ops"]))
    edges = next(d for d in docs if d["key"]["has_embedding"] and d["key"]["has_head"])
    for d in (small, edges):
        fresh = tracer.compile_trace(_key(d))
        assert json.loads(tr.entry_json(fresh)) == d


def test_empty_cache_reads_shipped_traces_without_compiling(fresh_cache):
    if not _same_torch():
        pytest.skip("shipped traces were built with another torch release; they are not used here")
    d = json.loads(ENTRIES[0].read_text())
    got = tr.get_trace(_key(d))
    assert not got.compiled and fresh_cache == []
    assert tr.is_cached(_key(d))
    assert not (tr.cache_dir() / ENTRIES[0].name).exists()  # read in place, not copied into the disk cache


@pytest.mark.parametrize("how", ["switched off", "tracer edited", "entry edited", "no-cache"])
def test_fallback_compiles_when_shipped_traces_do_not_apply(fresh_cache, monkeypatch, tmp_path, how):
    src = ENTRIES[0]
    d = json.loads(src.read_text())
    key = _key(d)
    if how == "switched off":
        monkeypatch.setenv("SIMCAST_SHIPPED_TRACES", "0")
    elif how == "tracer edited":
        monkeypatch.setattr(tr, "tracer_sha256", lambda: "0" * 64)
    elif how == "entry edited":  # a checksum that no longer matches: never trusted
        shipped = tmp_path / "traces"
        shutil.copytree(tr.SHIPPED_DIR, shipped)
        d["ops"][0]["op"] = "linear" if d["ops"][0]["op"] != "linear" else "embedding"
        (shipped / src.name).write_text(json.dumps(d))
        monkeypatch.setattr(tr, "SHIPPED_DIR", shipped)
    got = tr.get_trace(key, use_disk_cache=how != "no-cache")
    assert got.compiled and fresh_cache == [key]
