"""Request-level serving simulation (``bench-serve``): requests, arrivals, the engine scheduler, the run's
window and result."""
