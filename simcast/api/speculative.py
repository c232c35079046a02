"""Speculative decoding as the one-calls take it: vLLM's ``speculative_config`` (a JSON string, a mapping,
or a :class:`~simcast.serving.speculative.spec.SpeculativeSpec`) or SGLang's ``speculative_*`` arguments, and
``spec_acceptance``; each argument is bounded like its CLI flag and an error names that flag. The CLI's
flags (``simcast/cli/speculative.py``) come here too, so a flag and a keyword give one spec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from simcast.api.common import check_options
from simcast.api.options import Flag, opt
from simcast.core.errors import require
from simcast.serving.speculative.spec import SpeculativeSpec

if TYPE_CHECKING:
    from simcast.sim.report import Report

SpeculativeConfigArg = str | Mapping[str, Any] | SpeculativeSpec
"""vLLM's ``--speculative-config``: its JSON text, the parsed mapping, or a built spec."""
AcceptanceArg = str | float | Sequence[float]
"""``--spec-acceptance``: one rate (0.7), one per speculative token ((0.8, 0.6, 0.4)) or their text."""
SGLANG_KEYWORDS = (
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_draft_model_path",
)
"""SGLang's ``--speculative-*`` flags as keywords (:class:`SpeculativeOptions` fields)."""


@dataclass(frozen=True, kw_only=True)
class SpeculativeOptions:
    """Speculative decoding as the one-calls take it (all None: off); each keyword is its CLI flag."""

    speculative_config: SpeculativeConfigArg | None = opt(
        None,
        "vLLM's --speculative-config: its JSON text, a mapping, or a SpeculativeSpec",
        flag=Flag(
            names=("--speculative-config",),
            help='vLLM\'s JSON, e.g. \'{"method": "eagle3", "num_speculative_tokens": 3}\': method mtp (or '
            "deepseek_mtp, qwen3_next_mtp, ...), eagle, eagle3 or ngram [default: off]",
        ),
    )
    speculative_algorithm: str | None = opt(
        None,
        "SGLang's --speculative-algorithm (EAGLE, EAGLE3, NEXTN, ...)",
        flag=Flag(
            names=("--speculative-algorithm",),
            help="SGLang's: EAGLE, EAGLE3, NEXTN (the model's MTP layer) or NGRAM [default: off]",
        ),
    )
    speculative_num_steps: int | None = opt(
        None,
        "SGLang's --speculative-num-steps (draft passes per step)",
        flag=Flag(
            names=("--speculative-num-steps",),
            help="SGLang's: draft passes per step [<= 64]",
            value_type="spec_tokens",
        ),
    )
    speculative_eagle_topk: int | None = opt(
        None,
        "SGLang's --speculative-eagle-topk (draft branches per step)",
        flag=Flag(
            names=("--speculative-eagle-topk",),
            help="SGLang's: drafts branched per pass (1: a chain; > 1: a draft tree of "
            "--speculative-num-draft-tokens tokens) [1]",
            value_type="spec_tokens",
        ),
    )
    speculative_num_draft_tokens: int | None = opt(
        None,
        "SGLang's --speculative-num-draft-tokens (tokens verified)",
        flag=Flag(
            names=("--speculative-num-draft-tokens",),
            help="SGLang's: tokens verified per step (top-k 1: num_steps + 1; top-k > 1 and NGRAM: required) [<= 65]",
            value_type="draft_tokens",
        ),
    )
    speculative_draft_model_path: str | None = opt(
        None,
        "SGLang's --speculative-draft-model-path",
        flag=Flag(names=("--speculative-draft-model-path",), help="SGLang's: the draft's name (a label in the output)"),
    )
    spec_acceptance: AcceptanceArg | None = opt(
        None,
        "acceptance rate of each draft token: one rate, one per token, or their text (None: published)",
        flag=Flag(
            names=("--spec-acceptance",),
            help="acceptance rate of each draft token given the ones before were accepted: one rate (0.7) or "
            "one per speculative token (0.8,0.6,0.4) [default: the method's published figure, labelled]",
        ),
    )


def speculative_spec(model: Any, o: SpeculativeOptions, *, dataset: str = "chat") -> SpeculativeSpec | None:
    """The :class:`SpeculativeSpec` the options give (None: speculative decoding off); ``model``: the
    target (its MTP layers are vLLM's default ``num_speculative_tokens`` for MTP); ``dataset``: the prompts'
    kind, chat or random, whose default acceptance applies (:mod:`simcast.serving.speculative.acceptance`)."""
    from simcast.serving.speculative.spec import (
        from_sglang_flags,
        from_vllm_dict,
        from_vllm_json,
        parse_acceptance,
        require_supported,
    )

    check_options(o)  # the speculative counts: the ranges their flags take (simcast.inputs.bounds)
    spec_acceptance, speculative_algorithm = o.spec_acceptance, o.speculative_algorithm
    rates = parse_acceptance(_acceptance_text(spec_acceptance))
    given = [f for f in SGLANG_KEYWORDS if getattr(o, f) is not None]
    vllm = o.speculative_config
    require(
        vllm is None or not given,
        "--speculative-config",
        vllm if vllm is None or isinstance(vllm, str) else type(vllm).__name__,
        f"give vLLM's --speculative-config or SGLang's --speculative-* flags, not both (also given: "
        f"--{given[0].replace('_', '-') if given else ''})",
    )
    mtp = getattr(model, "num_mtp_layers", 0)
    if isinstance(vllm, SpeculativeSpec):
        require(not rates, "--spec-acceptance", spec_acceptance, "a SpeculativeSpec carries its own acceptance")
        spec = vllm
    elif isinstance(vllm, str):
        spec = from_vllm_json(vllm, rates, mtp_layers=mtp, dataset=dataset)
    elif vllm is not None:
        require(isinstance(vllm, Mapping), "--speculative-config", type(vllm).__name__, "a JSON string or a mapping")
        spec = from_vllm_dict(dict(vllm), rates, mtp_layers=mtp, dataset=dataset)
    elif given:
        require(
            isinstance(speculative_algorithm, str),
            "--speculative-algorithm",
            speculative_algorithm,
            f"required with --{given[0].replace('_', '-')}",
        )
        alg = str(speculative_algorithm)
        if alg.upper() == "EAGLE" and mtp and not o.speculative_draft_model_path:
            # SGLang python/sglang/srt/server_args.py (_handle_speculative_decoding): a DeepseekV3ForCausalLM
            # target with EAGLE and no --speculative-draft-model-path drafts with the model itself, i.e. its own
            # MTP (NextN) layer, as NEXTN does; the DeepSeek launch docs write EAGLE
            alg = "NEXTN"
        spec = from_sglang_flags(
            alg,
            num_steps=o.speculative_num_steps,
            topk=o.speculative_eagle_topk,
            num_draft_tokens=o.speculative_num_draft_tokens,
            rates=rates,
            draft_model=o.speculative_draft_model_path or "",
            dataset=dataset,
        )
    else:
        require(not rates, "--spec-acceptance", spec_acceptance, "needs a speculative method flag")
        return None
    require_supported(spec, model)
    return spec


def _acceptance_text(v: AcceptanceArg | None) -> str | None:
    """``spec_acceptance`` as the flag's text (``parse_acceptance`` bounds it)."""
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, int | float) and not isinstance(v, bool):
        return repr(float(v))
    seq: list[Any] | None = list(v) if isinstance(v, Sequence) else None
    ok = seq is not None and all(isinstance(x, int | float) and not isinstance(x, bool) for x in seq)
    require(ok, "--spec-acceptance", type(v).__name__, "a rate, a sequence of rates in [0, 1], or their text")
    return ",".join(repr(float(x)) for x in seq or ())


def speculative_step(
    report: Report,
    spec: SpeculativeSpec,
    *,
    engine: str,
    batch_size: int,
    context_length: int,
    use_cache: bool = True,
) -> tuple[Report, dict[str, Any]]:
    """The verify step's ``report`` with the draft's time and the tokens per step in its assumptions, and
    the ``speculative`` block of ``simcast simulate --json`` (times in ms)."""
    from dataclasses import replace

    from simcast.core.assumption import Assumption, SpeculativeStep, Topic, note
    from simcast.deploy.deployment import Deployment
    from simcast.engines.policy import engine_policy
    from simcast.serving.speculative.draft import draft_coster
    from simcast.serving.step import StepCoster

    s = report.spec
    target = StepCoster(
        deployment=Deployment.of_spec(s),
        policy=engine_policy(engine, s.device, tp=s.parallel.tp, pp=s.parallel.pp),
        use_disk_cache=use_cache,
    )
    draft_s = draft_coster(target, spec)(batch_size, context_length)
    step_s = report.latency_s + draft_s
    tau = spec.tokens_per_step
    step = SpeculativeStep(
        verify_tokens=spec.verify_tokens,
        verify_s=report.latency_s,
        draft_passes=spec.k,
        draft_s=draft_s,
        tokens_per_step=tau,
        feature_draft=spec.method != "ngram",
    )
    records = (note(Topic.SPECULATIVE, spec.describe()), Assumption(topic=Topic.SPECULATIVE_STEP, facts=step))
    block = {
        "method": spec.method,
        "num_speculative_tokens": spec.k,
        "acceptance": list(spec.acceptance),
        "acceptance_source": spec.acceptance_source,
        "tokens_per_step": tau,
        "verify_step_ms": report.latency_s * 1e3,
        "draft_ms": draft_s * 1e3,
        "step_ms": step_s * 1e3,
        "ms_per_token": step_s / tau * 1e3,
    }
    return replace(report, assumptions=report.assumptions + records), block
