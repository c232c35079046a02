import contextlib
import os
import signal
import tempfile
from pathlib import Path

import pytest

# A private trace cache per test session: tests never read a developer's cache.
os.environ.setdefault("SIMCAST_CACHE_DIR", tempfile.mkdtemp(prefix="simcast-test-cache-"))

# Measured data (never committed): ../shared/calibration beside the repo, or SIMCAST_CALIBRATION_DIR
# (e.g. from a worktree)
CALIBRATION = Path(
    os.environ.get("SIMCAST_CALIBRATION_DIR") or Path(__file__).resolve().parents[2] / "shared" / "calibration"
)


@pytest.fixture(scope="session")
def h100():
    from simcast.inputs.loaders import load_device

    return load_device("h100_sxm")


@pytest.fixture(scope="session")
def llama70b():
    from simcast.inputs.loaders import load_model

    return load_model("meta-llama/Llama-3.1-70B")


@pytest.fixture(scope="session")
def qwen06b():
    from simcast.inputs.loaders import load_model

    return load_model("Qwen/Qwen3-0.6B")


@contextlib.contextmanager
def time_limit(seconds: int = 30):
    """A hang fails the test instead of stalling the suite (SIGALRM; the old code hung for minutes on some inputs)."""

    def boom(*_):
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
