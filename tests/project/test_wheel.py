"""simcast built as a wheel and installed (not editable) runs from anywhere: its model configs, device
profiles and workloads travel as package data (read with importlib.resources), not from the repository.

Built and installed offline (``pip wheel --no-deps --no-build-isolation --no-index``, ``pip install
--no-deps --no-index --target``): the dependencies (torch, numpy, pandas, ...) come from the running
environment, so this checks simcast's own files and entry point, not dependency resolution.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_installed_wheel_runs_optimize_outside_the_repo(tmp_path: Path) -> None:
    src = tmp_path / "src"  # a copy: the build writes build/ and *.egg-info beside pyproject.toml
    shutil.copytree(REPO / "simcast", src / "simcast", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    dist = tmp_path / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    built = _run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(dist), str(src)], tmp_path
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("simcast-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for data in (
        "simcast/data/models/meta-llama/Llama-3.1-8B/config.json",
        "simcast/data/device_profiles/h100_sxm.yaml",
        "simcast/data/workloads/sharegpt.yaml",
    ):
        assert data in names, f"{data} missing from the wheel"
    site = tmp_path / "site"
    inst = _run([*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)], tmp_path)
    assert inst.returncode == 0, inst.stderr[-2000:]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMCAST_")}
    env.update(PYTHONPATH=str(site), SIMCAST_CACHE_DIR=str(tmp_path / "cache"))
    where = _run([sys.executable, "-c", "import simcast; print(simcast.__file__)"], elsewhere, env)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).resolve().is_relative_to(site.resolve())

    run = _run(
        [
            sys.executable,
            "-m",
            "simcast",
            "optimize",
            "--model",
            "meta-llama/Llama-3.1-8B",
            "--device",
            "h100_sxm",
            "--num-devices",
            "2",
            "--tp-sizes",
            "1",
            "2",
            "--input-length",
            "512",
            "--output-length",
            "64",
            "--batch-sizes",
            "1",
            "8",
        ],
        elsewhere,
        env,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "token/s/device" in run.stdout and "TP=2 | PP=1 | DP=1" in run.stdout
    listed = _run([sys.executable, "-m", "simcast", "devices"], elsewhere, env)
    assert listed.returncode == 0 and "h100_sxm" in listed.stdout


def test_source_version_is_the_project_version():
    """``simcast.core.version.VERSION`` (what ``simcast.__version__`` and the trace cache key read) is
    pyproject.toml's ``version``."""
    import re

    from simcast import __version__
    from simcast.core.version import VERSION

    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert VERSION == re.search(r'^version = "([^"]+)"', text, re.M).group(1) == __version__
