"""Disaggregated serving: prefill and decode pools joined by a KV transfer (steady state, request level, search)."""
