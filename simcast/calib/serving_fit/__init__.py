"""Fitting an engine's CPU time per step and per request to measured serving runs (``calibrate-serving``)."""
