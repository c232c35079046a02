"""What the report pages read of the API's results, as protocols (render sits below api: it names the fields
it needs, not the API's classes; :class:`simcast.api.optimize.SearchResult` and
:class:`simcast.api.bench.BenchResult` satisfy them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from simcast.serving.config import ServingConfig
from simcast.serving.request_level.bench_metrics import BenchMetrics
from simcast.serving.request_level.bench_result import BenchResult as RequestRun
from simcast.serving.search.layouts import Candidate, Rejection, SearchSpace


class SearchRowLike(Protocol):
    @property
    def best(self) -> bool: ...
    @property
    def meets_limits(self) -> bool: ...


class SearchLike(Protocol):
    """A layout search: ranked candidates, every point's row, the rejected layouts, the space and base config."""

    @property
    def rows(self) -> Sequence[SearchRowLike]: ...
    @property
    def rejected(self) -> Sequence[Rejection]: ...
    @property
    def candidates(self) -> Sequence[Candidate]: ...
    @property
    def space(self) -> SearchSpace: ...
    @property
    def config(self) -> ServingConfig: ...


class BenchLike(Protocol):
    """One bench-serve run: its metrics, the request-level run, the configuration, the lengths' source."""

    @property
    def summary(self) -> BenchMetrics: ...
    @property
    def run(self) -> RequestRun: ...
    @property
    def config(self) -> ServingConfig: ...
    @property
    def source(self) -> str: ...
    @property
    def assumptions(self) -> Sequence[str]: ...
