"""``--engine dynamo-<backend>``: Dynamo's workers run their backend engine (simcast/engines/dynamo.py), so the
run equals the backend's; ``--engine dynamo`` alone is one line, exit 2."""

from __future__ import annotations

import pytest

from simcast.cli.main import main
from simcast.engines.dynamo import backend_engine


def test_spellings_map_to_the_backend():
    assert backend_engine("dynamo-sglang") == "sglang"
    assert backend_engine("dynamo.trtllm") == "trtllm"  # the module name, python -m dynamo.trtllm
    assert backend_engine("Dynamo_vLLM") == "vllm"
    assert backend_engine("sglang") == "sglang"
    with pytest.raises(ValueError, match="dynamo-sglang"):
        backend_engine("dynamo")


def _run(capsys, engine: str) -> str:
    argv = ["bench-serve", "--model", "meta-llama/Llama-3.1-8B", "--device", "h100_sxm", "--engine", engine]
    rc = main(argv + ["--num-prompts", "8", "--random-input-len", "64", "--random-output-len", "8", "--no-cache"])
    out = capsys.readouterr().out
    assert rc == 0
    return out


def test_dynamo_run_is_the_backend_run(capsys):
    assert _run(capsys, "dynamo-sglang") == _run(capsys, "sglang")


def test_bare_dynamo_is_one_line(capsys):
    with pytest.raises(SystemExit) as e:
        main(["bench-serve", "--model", "meta-llama/Llama-3.1-8B", "--device", "h100_sxm", "--engine", "dynamo"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "dynamo-sglang" in err
