"""The balanced partition: never slower than vLLM's split, layers still sum to the model's."""

import pytest

from simcast.core.assumption import Topic, of_topic
from simcast.core.errors import SimcastInputError
from simcast.core.specs import Batch, ParallelSpec, SimSpec
from simcast.engines.partition import partition_layers
from simcast.inputs.loaders import load_model
from simcast.render.assumption_text import assumption_text
from simcast.sim.partition import balanced_counts, simulate_partitioned
from simcast.sim.simulate import simulate


@pytest.mark.parametrize(
    "name,pp,batch",
    [
        ("meta-llama/Llama-3.1-8B", 6, Batch.decode(64, 1024)),
        ("Qwen/Qwen3-0.6B", 4, Batch.prefill(4, 512)),
        ("meta-llama/Llama-3.2-1B", 3, Batch.decode(8, 256)),
    ],
)
@pytest.mark.slow
def test_balanced_not_slower_than_vllm(name, pp, batch, h100):
    m = load_model(name)
    spec = SimSpec(model=m, device=h100, parallel=ParallelSpec(pp=pp), batch=batch, num_microbatches=pp)
    counts = balanced_counts(spec)
    assert sum(counts) == m.num_layers and min(counts) >= 1 and len(counts) == pp
    vllm = simulate(spec)
    bal = simulate_partitioned(
        SimSpec(
            model=m, device=h100, parallel=ParallelSpec(pp=pp), batch=batch, num_microbatches=pp, partition="balanced"
        )
    )
    assert max(bal.runtime.stage_times_s) <= max(vllm.runtime.stage_times_s) + 1e-12
    assert bal.latency_s <= vllm.latency_s + 1e-12
    (resolved,) = of_topic(bal.assumptions, Topic.PARTITION_RESOLVED)
    assert assumption_text(resolved).startswith("partition balanced: layer counts ")
    assert resolved.facts.layer_counts == counts  # type: ignore[attr-defined]
    assert bal.plan.layer_counts == counts


@pytest.mark.slow  # over ~1 s on 2 cores: make test runs it, make test-fast does not
def test_balanced_moves_layers_off_the_lm_head_stage(h100):
    # decode of a 1B model with a 128k vocab: the last stage's lm_head is worth several layers
    m = load_model("meta-llama/Llama-3.2-1B")
    spec = SimSpec(model=m, device=h100, parallel=ParallelSpec(pp=4), batch=Batch.decode(16, 512), num_microbatches=4)
    counts = balanced_counts(spec)
    assert counts[-1] < partition_layers(16, 4, "vllm")[-1]


def test_plan_refuses_unresolved_balanced():
    with pytest.raises(SimcastInputError, match="balanced needs stage costs"):
        partition_layers(8, 2, "balanced")
