"""``optimize --serving-mode disagg|both``: the Pareto front of the disaggregated search and its finalists
replayed closed loop (edge module: runs the replays, words and tabulates them)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from simcast.render.tables import table

if TYPE_CHECKING:
    from simcast.serving.disagg.finalists import Replayed
    from simcast.serving.disagg.search import DisaggSearch
    from simcast.serving.disagg.steady import DisaggResult


def _user(r: DisaggResult) -> float:
    return 1.0 / r.tpot_s if r.tpot_s > 0 else 0.0


def front_rows(front: list[DisaggResult]) -> list[dict[str, Any]]:
    """The Pareto front as JSON rows (steady-state figures)."""
    from simcast.render.disagg_tables import disagg_row

    return [{**disagg_row(r), "token/s/user": _user(r), "source": "steady"} for r in front]


def format_front(found: DisaggSearch, top: int) -> str:
    """The front as a table: deployment, token/s/GPU, token/s/user, TTFT, TPOT (steady-state figures)."""
    from simcast.serving.search.layouts import model_label

    head = ["#", "xPyD", "devices", "prefill", "decode", "D batch", "token/s/GPU", "token/s/user", "ttft ms"]
    body = []
    for i, r in enumerate(found.front[: max(top, 1) * 2]):
        c = r.config
        body.append(
            [
                str(i + 1),
                c.label,
                str(c.num_devices),
                model_label(c.prefill),
                model_label(c.decode),
                str(r.decode.concurrency),
                f"{r.tokens_per_s_per_device:.1f}",
                f"{_user(r):.1f}",
                f"{r.ttft_s * 1e3:.1f}",
            ]
        )
    return table(head, body)


def replay_row(f: Replayed) -> dict[str, Any]:
    """A replayed finalist: its steady-state and replay figures side by side (ms, token/s)."""
    r = f.steady
    return {
        "ratio": r.config.label,
        "devices": r.num_devices,
        "max_concurrency": f.concurrency,
        "num_prompts": f.prompts,
        "steady": {"token/s/device": r.tokens_per_s_per_device, "token/s/user": _user(r), "ttft": r.ttft_s * 1e3},
        "replay": {
            "token/s/device": f.tokens_per_s_per_device,
            "token/s/user": f.tokens_per_s_per_user,
            "ttft": f.ttft_mean_s * 1e3,
            "tpot": f.tpot_mean_s * 1e3,
        },
    }


def _replay_table(done: list[Replayed]) -> str:
    head = ["#", "xPyD", "devices", "C", "prompts", "token/s/GPU steady", "replay", "token/s/user steady", "replay"]
    head += ["ttft ms steady", "replay"]
    body = []
    for i, f in enumerate(done):
        r = f.steady
        body.append(
            [str(i + 1), r.config.label, str(r.num_devices), str(f.concurrency), str(f.prompts)]
            + [f"{r.tokens_per_s_per_device:.1f}", f"{f.tokens_per_s_per_device:.1f}"]
            + [f"{_user(r):.1f}", f"{f.tokens_per_s_per_user:.1f}"]
            + [f"{r.ttft_s * 1e3:.1f}", f"{f.ttft_mean_s * 1e3:.1f}"]
        )
    return table(head, body)


def front_and_finalists(a: argparse.Namespace, found: DisaggSearch | None, lines: list[str], out: dict) -> None:
    """The front (``lines`` and ``out["pareto"]``) and the top ``--replay-top`` rows replayed
    (``out["replayed"]``), each figure labelled steady (the estimate that ranked it) or replay."""
    if found is None:
        return
    from simcast.serving.disagg.finalists import replay_finalist

    target = a.min_tokens_per_user
    lines += [
        "",
        f"whole-unit deployments: {found.unit_note} ({found.points} xPyD points meeting the limits); ranked at "
        + (f">= {target:g} token/s/user (1 / TPOT)" if target else "any token/s/user")
        + "; figures: steady-state estimate",
        "Pareto front (token/s/GPU against token/s/user, steady state):",
        format_front(found, a.top) if found.front else "  none meets the limits",
    ]
    out["pareto"] = front_rows(found.front)
    done = [
        replay_finalist(c.result, use_disk_cache=a.use_cache, seed=getattr(a, "seed", 0) or 0)
        for c in found.rows[: a.replay_top]
    ]
    if done:
        lines += [
            "",
            f"best {len(done)} deployment(s) replayed request by request (closed loop: --request-rate inf "
            "--max-concurrency C, the engine's PD router; replay token/s/GPU includes ramp-up and drain):",
            _replay_table(done),
        ]
        out["replayed"] = [replay_row(f) for f in done]
