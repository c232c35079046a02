"""--router on the API, bench-serve and serve-config (service YAML): every name the routers module declares
is accepted, a bad one is one error naming where it came from."""

from __future__ import annotations

import pytest

import simcast
from simcast.cli.main import main
from simcast.core.errors import SimcastInputError
from simcast.serving.request_level.routers import ROUTERS

SERVICE = """model: Qwen/Qwen3-0.6B
device: h100_sxm
workload: {input_length: 512, output_length: 64, batch_size: 8}
parallel_config: {world_size: 2, tp_size: 1, dp_size: 2, router: ROUTER}
"""


@pytest.mark.slow  # bench_serve's first call builds its step costs: over 1 s on 2 cores
def test_api_takes_a_new_router_and_refuses_others():
    kw = dict(model="Qwen/Qwen3-0.6B", device="h100_sxm", dp=2, num_prompts=8, input_length=128, output_length=8)
    res = simcast.bench_serve(router="kv_aware", **kw)
    assert len(res.run.requests) == 8 and {r.replica for r in res.run.requests} == {0, 1}
    assert any(a.startswith("router kv_aware: Dynamo KV router") for a in res.assumptions)
    with pytest.raises(SimcastInputError, match="--router"):
        simcast.bench_serve(router="sticky", **kw)
    assert ROUTERS[-1] == "kv_aware"


@pytest.mark.slow  # the steady state of a service: over 1 s on 2 cores
def test_serve_config_router_from_yaml_and_flag(tmp_path, capsys):
    svc = tmp_path / "svc.yaml"
    svc.write_text(SERVICE.replace("ROUTER", "cache_aware"))
    assert main(["serve-config", str(svc)]) == 0
    assert "router cache_aware across 2 replicas" in capsys.readouterr().out
    assert main(["serve-config", str(svc), "--router", "random"]) == 0
    assert "bench-serve --dp 2 --router random" in capsys.readouterr().out
    svc.write_text(SERVICE.replace("ROUTER", "sticky"))
    assert main(["serve-config", str(svc)]) == 2
    err = capsys.readouterr().err
    assert "parallel_config.router" in err and "cache_aware" in err
