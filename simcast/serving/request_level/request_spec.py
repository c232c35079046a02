"""One request as the request-level simulator sees it (lengths, arrival, shared prefix, conversation parent)."""

from __future__ import annotations

from dataclasses import dataclass

from simcast.core.errors import require


@dataclass(frozen=True, kw_only=True)
class RequestSpec:
    arrival_s: float
    input_len: int
    output_len: int
    kv_ready_tokens: int = 0  # prompt tokens whose KV arrives from elsewhere (a prefill pool): admitted uncomputed
    prefix_id: int = -1  # shared prefix (-1: none): its first prefix_len tokens equal every other request's of this id
    prefix_len: int = 0  # tokens of the shared prefix (<= input_len)
    parent: int = -1  # index of the request whose prompt + output this prompt starts with (-1: none); sent when
    # that request finishes (a conversation's next turn), its arrival_s then ignored

    def __post_init__(self) -> None:
        require(0 <= self.prefix_len <= self.input_len, "prefix_len", self.prefix_len, "must be in [0, input_len]")
        require(self.prefix_id >= -1 and self.parent >= -1, "prefix_id", self.prefix_id, "must be >= -1")
