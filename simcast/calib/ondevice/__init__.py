"""On-device measurement: the microbenchmark sweep's plan and time estimate (``bench_plan.py``, no torch)
and its timing with torch on the machine at hand (``microbench.py``)."""
