"""Steady-state serving estimates: an aggregated deployment's TTFT, TPOT and token/s at a concurrency."""
