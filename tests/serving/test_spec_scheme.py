"""The speculative-scheme interface: the do-nothing default answers the neutral values, a spec delegates."""

import pytest

from simcast.api.bench import BenchOptions
from simcast.api.step import StepOptions
from simcast.core.specs import ParallelSpec
from simcast.deploy.deployment import Deployment
from simcast.engines import NO_ENGINE
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.speculative.scheme import NO_SPECULATION, DraftSpeculation, scheme_of
from simcast.serving.speculative.spec import SpeculativeSpec
from simcast.serving.steady.model import ServingConfig, Workload, coster_for
from simcast.serving.step import NO_DRAFT

LLAMA8B = "meta-llama/Llama-3.1-8B"


def _cfg(spec=None) -> ServingConfig:
    return ServingConfig(
        deployment=Deployment(
            model=load_model(LLAMA8B), device=load_device("h100_sxm"), parallel=ParallelSpec(tp=1), engine="vllm"
        ),
        workload=Workload(input_length=512, output_length=64),
        batch_size=4,
        speculative=spec,
    )


def test_no_speculation_is_neutral():
    s = scheme_of(None)
    assert s is NO_SPECULATION and not s.active and s.label == ""
    assert (s.tokens_per_step, s.verify_tokens) == (1.0, 1)
    m = load_model(LLAMA8B)
    assert s.draft_weight_bytes(m, ParallelSpec(tp=1)) == 0
    assert s.draft_kv_bytes_per_token(m, 1, "auto") == 0
    assert s.memory_note(m, ParallelSpec(tp=1), "auto") == ""
    assert s.serving_notes() == () and s.bench_notes() == []


def test_no_draft_leaves_stage_times_unchanged():
    coster = coster_for(_cfg())
    assert coster.draft_s is NO_DRAFT and NO_DRAFT(8, 1024) == 0.0
    assert coster.with_draft((1e-3, 2e-3), 8, 1024) == (1e-3, 2e-3)


def test_a_spec_delegates():
    spec = SpeculativeSpec(method="eagle", num_speculative_tokens=3, acceptance=(0.5,))
    s = _cfg(spec).scheme
    assert isinstance(s, DraftSpeculation) and s.active and s.label == "eagle k=3"
    assert s.tokens_per_step == pytest.approx(1 + 0.5 + 0.25 + 0.125)  # 1 + E, E = sum of prod a_j
    assert s.verify_tokens == 4
    assert s.draft_weight_bytes(load_model(LLAMA8B), ParallelSpec(tp=1)) > 0
    assert [a.topic.value for a in s.serving_notes()] == ["speculative", "speculative tpot"]
    coster = coster_for(_cfg(spec))
    assert coster.with_draft((1e-3,), 8, 1024)[0] > 1e-3  # the draft's passes on the last stage


def test_engine_none_is_normalised_at_the_api():
    assert StepOptions(model=LLAMA8B, device="h100_sxm", engine=None).engine == NO_ENGINE  # type: ignore[arg-type]
    assert BenchOptions(model=LLAMA8B, device="h100_sxm", engine=None).engine == NO_ENGINE  # type: ignore[arg-type]
