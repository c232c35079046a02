"""Searching deployments: layouts and batches, refinement with the request-level simulator, the task runner."""
