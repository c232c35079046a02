"""Many steps' batches laid out as numpy arrays, for costing them in one pass (:mod:`simcast.cost.ops.batched`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simcast.core.specs import Batch


@dataclass(frozen=True, eq=False)
class Batches:
    """``N`` batches as arrays: per batch the dims ``T`` (new tokens), ``R`` (requests), ``S`` (KV slots);
    per request group (all batches' groups end to end, in order) its query and context lengths, its count
    and the batch it belongs to."""

    batches: tuple[Batch, ...]
    tokens: np.ndarray
    requests: np.ndarray
    kv_tokens: np.ndarray
    q: np.ndarray
    c: np.ndarray
    n: np.ndarray
    owner: np.ndarray

    @staticmethod
    def of(batches: Sequence[Batch]) -> Batches:
        bs = tuple(batches)
        sizes = [len(b.query_lens) for b in bs]
        q = np.fromiter((x for b in bs for x in b.query_lens), dtype=np.int64)
        c = np.fromiter((x for b in bs for x in b.context_lens), dtype=np.int64)
        n = np.fromiter((x for b in bs for x in b.counts), dtype=np.int64)
        owner = np.repeat(np.arange(len(bs)), sizes)
        nb = len(bs)
        tokens = np.bincount(owner, weights=q * n, minlength=nb).astype(np.int64)
        requests = np.bincount(owner, weights=n, minlength=nb).astype(np.int64)
        kv = np.bincount(owner, weights=c * n, minlength=nb).astype(np.int64) + tokens
        return Batches(batches=bs, tokens=tokens, requests=requests, kv_tokens=kv, q=q, c=c, n=n, owner=owner)

    def __len__(self) -> int:
        return len(self.batches)

    @property
    def dims(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.tokens, self.requests, self.kv_tokens

    def per_batch(self, values: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
        """Sum of per-group ``values`` over each batch's groups (only ``groups``, a mask, when given),
        added in group order as the scalar formulas add them."""
        owner = self.owner if groups is None else self.owner[groups]
        return np.bincount(owner, weights=values, minlength=len(self.batches))
