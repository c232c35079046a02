"""The flags an engine accepts, as data: each engine module lists its own :class:`EngineFlag` records
(:attr:`simcast.engines.base.Engine.own_flags`), the flags every engine shares are :data:`SHARED_HEAD` and
:data:`SHARED_TAIL`, and :func:`flags_in_order` puts them in the order ``--help`` shows them. The CLI builds
its parser from them (``simcast/cli/engine_args.py``); the API and a service YAML read the same records
(keyword = :attr:`EngineFlag.keyword`, bounds = :attr:`EngineFlag.check`), so each flag is declared once.

A flag's ``default`` is the engine's own default read from its code (``source``: file @ commit), or None when
the engine derives it from the deployment (then ``help`` says so). ``check`` names a bounded value type of
the CLI (``simcast.cli.args.VALUE_TYPES``) or, for the engines' own settings, is an ``(lo, hi)`` pair of a
whole number (``integer``) or a real number.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True, kw_only=True)
class EngineFlag:
    """One flag: ``names`` (the flag, then its aliases), the parsed flags' attribute ``dest``, the API /
    service-YAML ``keyword`` ("": the flag is read by the CLI only), the engine's ``default`` (None: derived
    from the deployment), its ``unit`` ("" for a count or a switch), ``help`` (``--help`` text), ``check``
    (a CLI value-type name, or ``(lo, hi)`` bounds), ``integer`` (whole numbers only, with ``(lo, hi)``),
    ``action`` (a switch's argparse action), ``group`` (flags of one group are mutually exclusive and listed
    together), ``engine`` (the engine that owns it, "" for a shared flag) and ``source`` (where the default
    is read: engine file @ commit)."""

    names: tuple[str, ...]
    dest: str
    help: str
    keyword: str = ""
    default: Any = None
    unit: str = ""
    check: str | tuple[float, float] | None = None
    integer: bool = True
    action: Any = None
    group: str = ""
    engine: str = ""
    source: str = ""

    @property
    def name(self) -> str:
        """The flag as a user writes it (its first name)."""
        return self.names[0]

    def checked(self, value: Any) -> Any:
        """``value`` within the flag's ``(lo, hi)`` bounds (a whole number when ``integer``), else one
        :class:`~simcast.core.errors.SimcastInputError` naming the flag (bounded value types are checked
        by the CLI's parser)."""
        from simcast.core.errors import require

        if self.action == "boolean_optional":
            require(isinstance(value, bool), self.name, value, "must be True or False")
            return value
        if not isinstance(self.check, tuple):
            return value
        lo, hi = self.check
        kind = int if self.integer else (int, float)
        ok = isinstance(value, kind) and not isinstance(value, bool) and lo <= value <= hi
        what = "an integer" if self.integer else "a number"
        require(ok, self.name, value, f"must be {what} in {lo:g}..{hi:g}" + (f" ({self.unit})" if self.unit else ""))
        return value


_ENGINE_DEFAULT = "[default: the engine's own; <= 10^9]"

SHARED_HEAD: tuple[EngineFlag, ...] = (
    EngineFlag(
        names=("--max-num-batched-tokens", "--max-batched-tokens", "--chunked-prefill-size"),
        dest="max_batched_tokens",
        keyword="max_num_batched_tokens",
        unit="tokens",
        check="batched_tokens",
        help="token budget of one step, the prompt chunk size with chunked prefill (vLLM --max-num-batched-tokens, "
        "SGLang --chunked-prefill-size) " + _ENGINE_DEFAULT,
    ),
    EngineFlag(
        names=("--max-num-seqs",),
        dest="max_num_seqs",
        keyword="max_num_seqs",
        unit="requests",
        check="requests",
        help="running requests per step [default: the engine's own; <= 10^6]",
    ),
    EngineFlag(
        names=("--engine-profile",),
        dest="engine_profile",
        keyword="engine_profile",
        help="engine profile YAML (simcast calibrate-serving --out): its CPU overheads and limits replace the "
        "engine's defaults",
    ),
)
"""The limits every engine has, listed before the engines' memory flags (vLLM's spelling, the others' as
aliases): the step's token budget, the running requests, a calibrated engine profile."""

SHARED_TAIL: tuple[EngineFlag, ...] = (
    EngineFlag(
        names=("--max-model-len",),
        dest="max_model_len",
        keyword="max_model_len",
        unit="tokens",
        check="tokens",
        help="longest request the engine accepts (vLLM --max-model-len, SGLang --context-length, TensorRT-LLM "
        "--max_seq_len); longer requests are refused, and the KV cache must hold one [default: not set]",
    ),
    EngineFlag(
        names=("--enable-prefix-caching",),
        dest="prefix_caching",
        keyword="prefix_caching",
        action="boolean_optional",
        group="prefix_caching",
        help="prefix caching (vLLM's flag; --no-enable-prefix-caching: off): prompts reuse cached KV blocks of "
        "shared prefixes [default: the engine's own: vLLM V1, SGLang radix cache and TensorRT-LLM block reuse on]",
    ),
)
"""The limits every engine has, listed after the memory flags: the context limit and prefix caching."""


def memory_flag(engine: str, flag: str, what: str, keyword: str) -> EngineFlag:
    """An engine's memory-fraction flag ``flag`` (one of the mutually exclusive ``memory`` group)."""
    return EngineFlag(
        names=(flag,),
        dest="mem_" + engine,
        keyword=keyword,
        check="fraction",
        group="memory",
        engine=engine,
        help=f"{engine}'s memory flag: {what} [default: the engine's own; (0, 1]]",
    )


def merge_same_names(*flags: EngineFlag) -> list[EngineFlag]:
    """``flags`` with each set of flags of one spelling (several engines' setting of one name, e.g. SGLang's
    ``--stream-interval`` and TensorRT-LLM's ``stream_interval``) listed once, at the first: its help the
    engines' helps joined, its bounds the first's (each engine checks its own value, ``Engine.check_settings``).
    Flags of one spelling must share ``dest`` and ``keyword`` (a ValueError otherwise: a programming error)."""
    out: list[EngineFlag] = []
    for f in flags:
        i = next((i for i, g in enumerate(out) if g.names == f.names), None)
        if i is None:
            out.append(f)
            continue
        g = out[i]
        if (g.dest, g.keyword) != (f.dest, f.keyword):
            raise ValueError(f"{f.name}: engines {g.engine} and {f.engine} give it different settings")
        unit = g.unit if g.unit == f.unit else ""
        out[i] = replace(g, help=f"{g.help}; {f.help}", engine=f"{g.engine},{f.engine}", unit=unit, source="")
    return out


def flags_in_order(flags: Iterable[EngineFlag]) -> list[EngineFlag]:
    """``flags`` in order, each group's flags moved up to follow its first one (argparse shows a mutually
    exclusive group as one usage item only when its flags are consecutive)."""
    out: list[EngineFlag] = []
    for f in flags:
        last = max((i for i, g in enumerate(out) if f.group and g.group == f.group), default=None)
        out.insert(len(out) if last is None else last + 1, f)
    return out
