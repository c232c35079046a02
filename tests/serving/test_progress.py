"""Long searches show progress on stderr (issue 25, item 7.8): the layouts, the disaggregated pools, and the
stage traces they compile (each its own tqdm bar); nothing when stderr is not a terminal."""

from __future__ import annotations

import pytest

import simcast
from simcast.serving.search import parallel
from simcast.trace import cache

BASE = {"model": "Qwen/Qwen3-0.6B", "device": "h100_sxm", "input_length": 64, "output_length": 8}


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    """No trace anywhere: every stage trace of the search is compiled."""
    monkeypatch.setenv("SIMCAST_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SIMCAST_SHIPPED_TRACES", "0")
    cache.clear_memory_cache()
    cache.shipped_usable.cache_clear()
    yield
    cache.clear_memory_cache()
    cache.shipped_usable.cache_clear()


def test_progress_shown_only_on_a_terminal(monkeypatch):
    assert parallel.progress_shown(3, True) and not parallel.progress_shown(3, False)
    assert not parallel.progress_shown(3, None)  # pytest's stderr is not a terminal
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert parallel.progress_shown(3, None) and not parallel.progress_shown(1, None)


@pytest.mark.slow  # compiles 8 stage traces (~5 s)
def test_a_serial_search_shows_its_traces_then_its_layouts(empty_cache, capsys):
    r = simcast.optimize(**BASE, num_devices=4, tp_sizes=[1, 2, 4], pp_sizes=[1, 2], progress=True)
    err = capsys.readouterr().err
    assert "stage traces" in err and "layouts" in err and err.index("stage traces") < err.index("layouts")
    cache.clear_memory_cache()  # the same rows without the warm-up (no bar: nothing compiled up front)
    again = simcast.optimize(**BASE, num_devices=4, tp_sizes=[1, 2, 4], pp_sizes=[1, 2], progress=False)
    assert capsys.readouterr().err == "" and again.to_dict()["rows"] == r.to_dict()["rows"]


@pytest.mark.slow
def test_disagg_pools_show_progress(empty_cache, capsys):
    from simcast.api.optimize import optimize_setup
    from simcast.api.search_inputs import SearchOptions, search_space
    from simcast.serving.disagg.search import evaluate_pools

    o = SearchOptions(**BASE, num_devices=2, tp_sizes=(1, 2))
    setup = optimize_setup(o, search_space(o))
    pools = evaluate_pools(setup.config, setup.space, progress=True)
    err = capsys.readouterr().err
    assert len(pools) == 2 and "pools" in err and "stage traces" in err
