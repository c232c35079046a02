"""SGLang's server-argument rules a launch line must keep (``--emit sglang``), each citing the engine's code."""

from __future__ import annotations

from simcast.engines.launch_rules import Rule, flag_int

_SG_ARGS = "sgl-project/sglang python/sglang/srt/server_args.py@001067f"
_SG_PS = "sgl-project/sglang python/sglang/srt/distributed/parallel_state.py (initialize_model_parallel)"

LAUNCH_RULES: tuple[Rule, ...] = (
    Rule(
        name="dp_attention_needs_dp",
        says="--enable-dp-attention needs --dp-size > 1 (SGLang switches it off at dp_size 1)",
        source=f"{_SG_ARGS} ServerArgs._handle_data_parallelism",
        ok=lambda f: "--enable-dp-attention" not in f or flag_int(f, "--dp-size") > 1,
    ),
    Rule(
        name="dp_attention_divides_tp",
        says="with --enable-dp-attention, --dp-size must divide --tp-size (tp counts every GPU of a stage)",
        source=f"{_SG_ARGS} ServerArgs._handle_data_parallelism (assert tp_size % dp_size == 0)",
        ok=lambda f: (
            "--enable-dp-attention" not in f or flag_int(f, "--tp-size") % max(1, flag_int(f, "--dp-size")) == 0
        ),
    ),
    Rule(
        name="moe_groups_divide_tp",
        says="--ep-size x --moe-dp-size must divide --tp-size (moe_tp_size = tp_size // ep_size // moe_dp_size)",
        source=_SG_PS,
        ok=lambda f: (
            flag_int(f, "--ep-size") * flag_int(f, "--moe-dp-size") > 0
            and flag_int(f, "--tp-size") % (flag_int(f, "--ep-size") * flag_int(f, "--moe-dp-size")) == 0
        ),
    ),
    Rule(
        name="multi_node_needs_rank_and_address",
        says="--nnodes > 1 needs --node-rank in [0, nnodes) and --dist-init-addr HOST:PORT",
        source=f"{_SG_ARGS} (nnodes, node_rank, dist_init_addr)",
        ok=lambda f: (
            flag_int(f, "--nnodes") <= 1
            or (0 <= flag_int(f, "--node-rank", -1) < flag_int(f, "--nnodes") and bool(f.get("--dist-init-addr")))
        ),
    ),
    Rule(
        name="nodes_divide_ranks",
        says="--nnodes must divide the server's GPUs (--tp-size x --pp-size): each node runs an equal share",
        source=f"{_SG_ARGS} (tp ranks per node = tp_size * pp_size // nnodes)",
        ok=lambda f: (flag_int(f, "--tp-size") * flag_int(f, "--pp-size")) % max(1, flag_int(f, "--nnodes")) == 0,
    ),
)
"""The argument rules ``--emit sglang`` checks on each server line."""
