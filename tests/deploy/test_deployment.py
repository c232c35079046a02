"""One Deployment and a Partition parsed once (issue 25 item 2): the partition text is read in one place,
the engine checked in one place, and the serving config, step spec and step coster carry the same
deployment (the step spec keeps the canonical partition text: core sits below the engines' rules)."""

from __future__ import annotations

import dataclasses

import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.specs import Batch, ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines.partition import Partition
from simcast.serving.config import ServingConfig, Workload


def test_partition_text_is_parsed_once_into_counts():
    p = Partition.parse(" VLLM_PP_LAYER_PARTITION='4, 6,6 ,4' ")
    assert (p.text, p.counts) == ("4,6,6,4", (4, 6, 6, 4))
    assert p.layers(20, 4) == (4, 6, 6, 4)
    assert Partition.of(p) is p
    # the engines' rules, 22 layers over 4 stages: vLLM before the last, SGLang on the last, TRT-LLM first
    assert [Partition.parse(r).layers(22, 4) for r in ("vllm", "sglang", "trtllm")] == [
        (5, 6, 6, 5),
        (5, 5, 6, 6),
        (6, 6, 5, 5),
    ]
    assert Partition.explicit([3, 5]) == Partition.parse("3,5")
    assert str(Partition.explicit([3, 5])) == "3,5"


def test_partition_not_given_is_the_engines_rule():
    assert [Partition.given(None, e).text for e in ("vllm", "sglang", "trtllm", "none", None)] == [
        "vllm",
        "sglang",
        "trtllm",
        "vllm",
        "vllm",
    ]
    assert Partition.given("uniform", "sglang").text == "uniform"


@pytest.mark.parametrize("text", ["1_4,4", "٤,4", "even", "-1,5"])
def test_bad_partition_text_is_one_input_error(text):
    with pytest.raises(SimcastInputError) as e:
        Partition.parse(text)
    assert e.value.field == "--partition"


def test_explicit_counts_must_fit_the_layout():
    with pytest.raises(SimcastInputError, match="needs exactly pp_size=4"):
        Partition.parse("10,10").layers(20, 4)
    with pytest.raises(SimcastInputError, match="must sum to the model's 20 layers"):
        Partition.parse("4,6,6,5").layers(20, 4)
    with pytest.raises(SimcastInputError, match="balanced needs stage costs"):
        Partition.parse("balanced").layers(20, 4)


def test_the_engine_is_checked_once_in_the_deployment(qwen06b, h100):
    with pytest.raises(SimcastInputError, match="allowed: vllm, sglang, trtllm, none"):
        Deployment(model=qwen06b, device=h100, engine="tgi")
    none = Deployment(model=qwen06b, device=h100)
    assert none.kernel_engine is None and none.partition == Partition()
    assert none.sim_spec(Batch.decode(2, 64)).engine is None
    sglang = Deployment.build(model=qwen06b, device=h100, engine="sglang", parallel=ParallelSpec(pp=2))
    spec = sglang.sim_spec(Batch.decode(2, 64), num_microbatches=2)
    assert (spec.engine, spec.partition, spec.num_microbatches) == ("sglang", "sglang", 2)
    assert Deployment.of_spec(spec) == sglang


def test_a_serving_config_holds_its_deployment(qwen06b, h100):
    d = Deployment(model=qwen06b, device=h100, engine="vllm", partition="uniform")
    cfg = ServingConfig(deployment=d, workload=Workload(input_length=128, output_length=8), batch_size=4)
    assert (cfg.model, cfg.device, cfg.runtime, cfg.partition.text) == (qwen06b, h100, "vllm", "uniform")
    moved = cfg.redeployed(parallel=ParallelSpec(tp=2))
    assert moved.parallel.tp == 2 and moved.workload == cfg.workload and moved.batch_size == 4
    assert moved.deployment == dataclasses.replace(d, parallel=ParallelSpec(tp=2))
