"""Prediction intervals: simcast's held-out residuals (residuals.py reads the shipped table) turned into an
interval per metric (intervals.py, pure)."""
