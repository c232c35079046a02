"""Speculative draft trees and dataset-dependent acceptance (serving/speculative/tree.py, acceptance.py).

Hand-computed expected lengths under the rank model, the chain as the tree of top-1 candidates (top-k 1 and a
tree that is a chain give the chain's E and verify tokens), a wider tree accepting more than the chain at the
same depth, vLLM's tree literal, SGLang's draft widths in the draft's cost, and random-token prompts accepting
fewer drafts than chat for every method with a default.
"""

from __future__ import annotations

import pytest

from simcast.core.errors import SimcastInputError
from simcast.serving.speculative.acceptance import DEFAULT_ACCEPTANCE, RANDOM_FACTOR, default_acceptance
from simcast.serving.speculative.spec import SpeculativeSpec, from_sglang_flags, from_vllm_dict
from simcast.serving.speculative.tree import best_first_tree, chain, expected_accepted, parse_vllm_tree, pass_widths


def test_chain_is_the_tree_of_top_candidates():
    a = (0.8, 0.6, 0.4)
    # E = 0.8 + 0.8*0.6 + 0.8*0.6*0.4 = 1.472
    assert expected_accepted(chain(3), a) == pytest.approx(1.472)
    assert best_first_tree(a, 1, 3, 3) == chain(3)
    flat = SpeculativeSpec(method="eagle", num_speculative_tokens=3, acceptance=a)
    as_tree = SpeculativeSpec(method="eagle", num_speculative_tokens=3, acceptance=a, tree=chain(3))
    assert not as_tree.is_tree and as_tree.expected_accepted == flat.expected_accepted == pytest.approx(1.472)
    assert as_tree.verify_tokens == flat.verify_tokens == 4


def test_topk_one_equals_the_chain():
    c = from_sglang_flags("EAGLE", num_steps=3, topk=1, num_draft_tokens=4, rates=(0.7,))
    n = from_sglang_flags("EAGLE", num_steps=3, topk=None, num_draft_tokens=None, rates=(0.7,))
    assert c == n and not c.is_tree and c.tokens_per_step == pytest.approx(1 + 0.7 + 0.49 + 0.343)


def test_a_tree_by_hand():
    a = (0.5, 0.5)
    # nodes (0,), (1,), (0,0): 0.5 + 0.5*0.5 + 0.5*0.5 = 1.0 (the chain of 2: 0.75)
    tree = parse_vllm_tree("[(0,), (1,), (0, 0)]", "t")
    assert expected_accepted(tree, a) == pytest.approx(1.0)
    assert pass_widths(tree) == (1, 1)
    # the best-first tree of 3 nodes at top-k 2, depth 2: (0,) .5, then (0,0) .25 and (1,) .25 tie; both beat (0,1)
    assert set(best_first_tree(a, 2, 2, 3)) == {(0,), (1,), (0, 0)}
    s = from_vllm_dict({"method": "eagle", "speculative_token_tree": "[(0,), (1,), (0, 0)]"}, (0.5,))
    assert s.is_tree and s.k == 2 and s.verify_tokens == 4 and s.tokens_per_step == pytest.approx(2.0)
    with pytest.raises(SimcastInputError, match="no parent"):
        parse_vllm_tree("[(0,), (1, 0)]", "t")


def test_more_nodes_accept_more():
    a = (0.6,) * 4
    es = [expected_accepted(best_first_tree(a, 4, 4, n), a) for n in range(1, 16)]
    assert all(x < y for x, y in zip(es, es[1:]))
    # every tree is bounded by the depth (at most 4 accepted)
    assert es[-1] < 4


def test_random_prompts_accept_fewer_drafts_than_chat():
    for method in DEFAULT_ACCEPTANCE:
        chat, rnd = default_acceptance(method, "chat", 3), default_acceptance(method, "random", 3)
        assert chat is not None and rnd is not None
        assert chat == ((DEFAULT_ACCEPTANCE[method][0],), DEFAULT_ACCEPTANCE[method][1])
        assert max(rnd[0]) < chat[0][0]
        if method != "mtp":  # no usable random-prompt measurement: the labelled fallback
            assert rnd[0] == (pytest.approx(chat[0][0] * RANDOM_FACTOR),)
            assert "FALLBACK ASSUMPTION" in rnd[1]
    s_chat = from_sglang_flags("NEXTN", num_steps=3, topk=1, num_draft_tokens=4)
    s_rand = from_sglang_flags("NEXTN", num_steps=3, topk=1, num_draft_tokens=4, dataset="random")
    assert s_rand.tokens_per_step < s_chat.tokens_per_step
    assert default_acceptance("ngram", "random") is None
