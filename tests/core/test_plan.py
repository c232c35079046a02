import pytest

from simcast.core.errors import SimcastInputError
from simcast.engines.partition import build_pipeline_stage_plan, partition_layers


def test_rfc_uniform_ceil_split():
    # ceil(22/4) = 6 per stage, last truncated
    assert partition_layers(22, 4, "uniform") == (6, 6, 6, 4)
    assert partition_layers(8, 4, "uniform") == (2, 2, 2, 2)


@pytest.mark.parametrize(
    "layers,pp,expect",
    [(22, 4, (5, 6, 6, 5)), (5, 3, (2, 2, 1)), (3, 2, (2, 1)), (80, 3, (27, 27, 26)), (32, 4, (8, 8, 8, 8))],
)
def test_vllm_partition_matches_get_pp_indices(layers, pp, expect):
    assert partition_layers(layers, pp, "vllm") == expect


def test_explicit_partition():
    assert partition_layers(20, 4, "4,6,6,4") == (4, 6, 6, 4)
    with pytest.raises(SimcastInputError, match="sum to the model's 20 layers"):
        partition_layers(20, 4, "4,6,6,5")
    with pytest.raises(SimcastInputError, match="exactly pp_size=4"):
        partition_layers(20, 4, "10,10")
    with pytest.raises(SimcastInputError, match="allowed: uniform, vllm"):
        partition_layers(20, 4, "even")


def test_empty_stage_is_an_error():
    # uniform: ceil(5/4) = 2 -> 2, 2, 1, 0: the last stage would be empty
    with pytest.raises(SimcastInputError, match="no decoder layer"):
        partition_layers(5, 4, "uniform")
    with pytest.raises(SimcastInputError, match="no decoder layer"):
        partition_layers(6, 3, "3,3,0")
    with pytest.raises(SimcastInputError, match="must be <= the model's 4 layers"):
        partition_layers(4, 5, "vllm")


def test_stage_infos_cover_all_layers_once():
    plan = build_pipeline_stage_plan(22, 4, "vllm")
    seen = [i for s in plan.stage_infos for i in s.active_layer_indices]
    assert seen == list(range(22))
    s1 = plan.get_stage(1)
    assert (s1.start_layer, s1.end_layer) == (5, 11)
    assert s1.owns_layer(5) and s1.owns_layer(10) and not s1.owns_layer(11)
    assert s1.enabled and not s1.is_first_stage and not s1.is_last_stage
    assert plan.get_stage(0).is_first_stage and plan.get_stage(3).is_last_stage


def test_edge_module_ownership():
    plan = build_pipeline_stage_plan(8, 3, "vllm")
    first, mid, last = plan.stage_module_specs
    assert first.embedding and first.embedding_weights and not first.lm_head and first.input_kind == "input_ids"
    assert not mid.embedding and not mid.final_norm and not mid.lm_head and mid.input_kind == "inputs_embeds"
    assert last.final_norm and last.lm_head and not last.embedding and not last.embedding_weights
    assert [(e.src_stage, e.dst_stage) for e in plan.send_recv_edges] == [(0, 1), (1, 2)]


def test_tied_embeddings_live_on_the_last_stage_too():
    plan = build_pipeline_stage_plan(8, 2, "vllm", tie_word_embeddings=True)
    assert plan.stage_module_specs[0].embedding_weights and plan.stage_module_specs[1].embedding_weights
    single = build_pipeline_stage_plan(8, 1, "vllm", tie_word_embeddings=True)
    assert single.stage_module_specs[0].embedding and single.stage_module_specs[0].lm_head
    assert not single.stage_infos[0].enabled and single.send_recv_edges == ()
