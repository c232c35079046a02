"""The acceptance table (serving/speculative/acceptance.py): each row equals its source's published numbers,
cites no reserved source, converts vLLM's unconditional per-position rates to conditional ones by hand, and the
fallback for a method with no random-prompt measurement is labelled in the output."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simcast.serving.speculative.acceptance import MEASUREMENTS, RANDOM_FACTOR, default_acceptance, measured_default
from simcast.serving.speculative.spec import from_sglang_flags, from_vllm_json

ROOT = Path(__file__).resolve().parents[2]


def _row(url: str, length: float):
    return next(m for m in MEASUREMENTS if m.url == url and m.acceptance_length == length)


def test_rows_equal_their_sources():
    # vLLM PR 41044, results table, row "This PR, MTP probability proposal": Pos0 / Pos1 acceptance 70.02% /
    # 28.74%, mean acceptance length 1.99, random dataset 1024/256, num_speculative_tokens 2
    v4 = _row("https://github.com/vllm-project/vllm/pull/41044", 1.99)
    assert (v4.method, v4.dataset_kind, v4.num_speculative_tokens) == ("mtp", "random", 2)
    assert v4.per_position_unconditional == (0.7002, 0.2874)
    # the published length is 1 + the per-position rates (1 + 0.7002 + 0.2874 = 1.9876)
    assert 1 + sum(v4.per_position_unconditional) == pytest.approx(v4.acceptance_length, abs=0.005)
    # nebius/MTP-DeepSeek-V3-0324 model card, "Original MTP", temperature 0, K = 7: 3.20
    nb = _row("https://huggingface.co/nebius/MTP-DeepSeek-V3-0324", 3.20)
    assert (nb.method, nb.dataset_kind, nb.num_speculative_tokens) == ("mtp", "chat", 7)
    # tokenspeed issue 1305: 3.93 (random raw completion) and 1.94 (random chat completion) tokens per iteration
    for length in (3.93, 1.94):
        k3 = _row("https://github.com/lightseekorg/tokenspeed/issues/1305", length)
        assert (k3.method, k3.dataset_kind, k3.num_speculative_tokens) == ("eagle3", "random", 3)


def test_no_row_cites_a_reserved_source():
    pats = [
        re.compile(line.strip(), re.IGNORECASE)
        for line in (ROOT / "benchmarks/devset/reserved_sources.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for m in MEASUREMENTS:
        assert not any(p.search(m.url) or p.search(m.model + m.measured) for p in pats), m.url


def test_mtp_random_default_is_the_measured_row_made_conditional():
    # a_1 = 0.7002; a_2 = 0.2874 / 0.7002 = 0.41045 -> 0.4105; a_3 keeps a_2 (labelled extrapolation)
    row = measured_default("mtp", "random")
    assert row is not None and row.conditional_rates() == (0.7002, 0.4105)
    rates, src = default_acceptance("mtp", "random", 3) or ((), "")
    assert rates == (0.7002, 0.4105, 0.4105)
    assert "vllm-project/vllm/pull/41044" in src and "extrapolation" in src
    one, src1 = default_acceptance("mtp", "random", 1) or ((), "")
    assert one == (0.7002,) and "extrapolation" not in src1
    # in the spec a bench-serve run builds: 1 + 0.7002 + 0.7002*0.4105 tokens per verify step (k = 2)
    s = from_sglang_flags("NEXTN", num_steps=2, topk=1, num_draft_tokens=3, dataset="random")
    assert s.expected_accepted == pytest.approx(0.7002 + 0.7002 * 0.4105)
    assert "measured on random-token prompts" in s.describe()


def test_fallback_is_labelled_in_the_output():
    s = from_vllm_json('{"method": "eagle3", "num_speculative_tokens": 3}', dataset="random")
    assert s.acceptance == (round(0.75 * RANDOM_FACTOR, 4),) * 3
    assert "FALLBACK ASSUMPTION" in s.describe()
    # chat keeps its published default, unlabelled as a fallback
    c = from_vllm_json('{"method": "eagle3", "num_speculative_tokens": 3}')
    assert "FALLBACK" not in c.describe()


def test_sglang_eagle_on_a_model_with_mtp_layers_is_its_mtp():
    # SGLang's server_args sets the draft of a DeepseekV3ForCausalLM target run with EAGLE (no draft path) to the
    # model itself: its NextN layer, so EAGLE and NEXTN are one deployment; with a draft path it stays EAGLE
    from simcast.api.speculative import SpeculativeOptions, speculative_spec
    from simcast.inputs.loaders import load_model

    ds = load_model("deepseek-ai/DeepSeek-V3")
    kw = dict(speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)
    eagle = speculative_spec(ds, SpeculativeOptions(speculative_algorithm="EAGLE", **kw))
    nextn = speculative_spec(ds, SpeculativeOptions(speculative_algorithm="NEXTN", **kw))
    assert eagle is not None and nextn is not None
    assert (eagle.method, eagle.acceptance) == (nextn.method, nextn.acceptance) == ("mtp", (0.85,) * 3)
    head = speculative_spec(
        ds, SpeculativeOptions(speculative_algorithm="EAGLE", speculative_draft_model_path="some/eagle-head", **kw)
    )
    assert head is not None and head.method == "eagle"
