"""bench-serve's serial front end: how many processes an open-loop run queues at, and the note it prints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from simcast.serving.config import ServingConfig


class _Client(Protocol):
    """What these rules read of the run's options (:class:`simcast.api.bench.BenchOptions`)."""

    @property
    def max_concurrency(self) -> int | None: ...
    @property
    def dp(self) -> int: ...


def _front_end_processes(o: _Client, cfg: ServingConfig) -> int:
    """Serial front-end processes for an open-loop run (a rate or a burst). Not with ``--max-concurrency``: a
    client that keeps C requests in flight loads the front end with C / E2E requests/s, far below its rate
    at the concurrencies benchmarks use, while simcast's identical lengths would finish C requests in one
    step and resend them together, a queue real runs (spread lengths) do not build."""
    return 0 if o.max_concurrency else cfg.policy.front_end_count(o.dp)


def _front_end_notes(o: _Client, cfg: ServingConfig) -> list[str]:
    """The line saying the serving path is a serial resource (none when the engine's record does not say so)."""
    n = _front_end_processes(o, cfg)
    if not n:
        return []
    return [
        f"serving path run by {n} front-end process{'es' if n > 1 else ''}, one request at a time (FIFO): a burst "
        f"queues there before the engine sees it; caps the request rate at {n} / serving path — "
        + cfg.policy.record.front_end_processes_source
    ]
