"""NIC sharing between the KV transfers that leave one prefill DP rank.

A prompt's KV leaves the prefill ranks that computed it, each rank over its own NIC
(:mod:`simcast.serving.disagg.kv_transfer`). Two requests that finish on the same prefill DP rank send
over the **same** NICs, so their transfers share the line rate; transfers from different DP ranks use
different NICs and do not interact. Modelled as a **FIFO queue per prefill DP rank's NICs** (one
server: a transfer holds the whole line rate for its data time ``bytes_rank / bw_eff`` and the next one
waits; NIXL and Mooncake post each request's blocks as one batch of RDMA writes, so the order is the
order the requests finished their prefill):

    finish_i = max(ready_i + alone_i, free + data_i),   free <- finish_i

with ``ready_i`` when request ``i``'s prefill finished, ``alone_i`` its exposed transfer on an idle NIC
(latency + data, or less when streamed layer by layer) and ``data_i = bytes_rank / bw_eff``. Two equal
transfers ready together on one NIC therefore finish at ``latency + data`` and ``latency + 2 data``: the
pair takes twice the data time in total. Processor sharing would finish both at ``latency + 2 data``;
FIFO gives the same total and the earlier first finish (the engines send requests' blocks in order).

The steady state (:func:`nic_wait_s`) charges the mean wait of that queue at a rate: M/D/1 per prefill DP
rank (Poisson finishes at the rank's prompt rate, deterministic data time),
``W = ρ / (2 μ (1 − ρ))`` with ``μ = 1 / data`` and ``ρ = rate · data``; inf at ``ρ >= 1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["NicQueues", "nic_wait_s"]


def nic_wait_s(rate_per_s: float, data_s: float) -> float:
    """Mean FIFO wait (s) for a prefill DP rank's NICs receiving ``rate_per_s`` transfers/s of ``data_s``
    each (M/D/1, module docstring); 0 at no rate or no data, inf when the NICs cannot carry the rate."""
    if rate_per_s <= 0 or data_s <= 0:
        return 0.0
    rho = rate_per_s * data_s
    return math.inf if rho >= 1 else rho * data_s / (2 * (1 - rho))


@dataclass
class NicQueues:
    """The FIFO queue of each prefill DP rank's NICs (module docstring): when each is free next (s)."""

    free_s: dict[int, float] = field(default_factory=dict)

    def finish(self, rank: int, ready_s: float, alone_s: float, data_s: float) -> float:
        """When a transfer of ``data_s`` on ``rank``'s NICs, ready at ``ready_s`` and taking ``alone_s`` on an
        idle NIC, finishes; the NICs are then busy until that moment."""
        done = max(ready_s + alone_s, self.free_s.get(rank, -math.inf) + data_s)
        self.free_s[rank] = done
        return done
