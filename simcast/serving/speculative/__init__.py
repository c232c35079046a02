"""Speculative decoding: the scheme a deployment runs (none, EAGLE, MTP, n-gram, draft model) and its draft."""
