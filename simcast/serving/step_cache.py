"""Stage times of one-microbatch steps shared by every :class:`~simcast.serving.step.StepCoster` of a layout in
one process: a bench-serve run, the notebook's sweeps, the optimizer's finalists and the disaggregated replay's
two pools cost many of the same steps again; each distinct step is costed once per process.

Key: the full ``repr`` of the step's :class:`~simcast.core.specs.SimSpec` template (the deployment: model,
device, layout, partition, engine and its settings, KV dtype, MoE flags; the engine policy's part of a step's
cost, ``tp_sharded_send``; the decode query length; the spec holds dicts, so the spec itself is unhashable) with
whether traces may come from disk, then the step shape (:class:`~simcast.core.specs.Batch`). Everything a
:class:`~simcast.sim.batched.LayoutCoster` reads is in it, so a hit returns the tuple a recomputation gives
(``tests/serving/test_step_cache.py``). The engine policy's CPU time, overlap and PP return hop are added per
call (not cached: cheap, and they differ between engines).

Only stage times computed on the stage-times path are stored (a coster's own memo also takes stage times from
the full reports it builds; those stay in that coster), so which coster asked first changes nothing.

Bounded: at most ``max_entries`` steps in all, least recently used layout dropped first, then a layout's
oldest steps. The module-level :data:`STEP_COST_CACHE` is the process-wide default (``clear()`` empties it);
a :class:`StepCoster` given ``shared=None`` keeps to its own memo.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence

from simcast.core.specs import Batch

DEFAULT_MAX_ENTRIES = 200_000  # steps: ~0.3 KB each (a Batch and its stage-time tuple), ~60 MB at most


class StepCostCache:
    """Bounded, process-wide store of stage times (s) by (layout key, step batch); see the module docstring."""

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._layouts: OrderedDict[Hashable, OrderedDict[Batch, tuple[float, ...]]] = OrderedDict()
        self._size = 0
        self.hits = 0  # steps answered from the store
        self.misses = 0  # steps looked up and not found

    def __len__(self) -> int:
        return self._size

    def get_many(self, layout: Hashable, batches: Sequence[Batch]) -> dict[Batch, tuple[float, ...]]:
        """The stored stage times of those of ``batches`` that ``layout`` has (the layout marked recently used)."""
        store = self._layouts.get(layout)
        if store is None:
            self.misses += len(batches)
            return {}
        self._layouts.move_to_end(layout)
        found = {b: store[b] for b in batches if b in store}
        self.hits += len(found)
        self.misses += len(batches) - len(found)
        return found

    def put_many(self, layout: Hashable, batches: Sequence[Batch], times: Sequence[tuple[float, ...]]) -> None:
        """Store ``times[i]`` for ``batches[i]`` of ``layout``, evicting the least recently used beyond the bound."""
        store = self._layouts.get(layout)
        if store is None:
            store = self._layouts[layout] = OrderedDict()
        self._layouts.move_to_end(layout)
        for b, t in zip(batches, times):
            if b not in store:
                self._size += 1
            store[b] = t
        self._evict(store)

    def _evict(self, keep: OrderedDict[Batch, tuple[float, ...]]) -> None:
        while self._size > self.max_entries and len(self._layouts) > 1:
            layout, old = next(iter(self._layouts.items()))
            if old is keep:
                break
            del self._layouts[layout]
            self._size -= len(old)
        while self._size > self.max_entries and keep:
            keep.popitem(last=False)
            self._size -= 1

    def clear(self) -> None:
        """Forget every stored step (and the hit counts)."""
        self._layouts.clear()
        self._size = self.hits = self.misses = 0


STEP_COST_CACHE = StepCostCache()
"""The process-wide default store (bounded: :data:`DEFAULT_MAX_ENTRIES` steps)."""
