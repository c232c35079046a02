"""``optimize --request-rate R`` (issue 26, item 7): the fewest devices that sustain R, attention-DP engines
searched at every device count, and when none does within --num-devices, the best rate reached, by which
layout and why, with exit 3."""

import json
import math

import pytest

from simcast.cli.exits import EXIT_NO_LAYOUT
from simcast.cli.main import main
from simcast.serving.search.fewest import device_counts

OPT = ["optimize", "Qwen/Qwen3-8B", "--device", "h100_sxm", "--num-devices", "4", "--tp-sizes", "1"]
OPT += ["--input-length", "128", "--output-length", "8", "--json"]


def run(args, capsys):
    rc = main(args)
    out = capsys.readouterr()
    return rc, out.out


def test_device_counts():
    assert device_counts(8) == [1, 2, 4, 8]
    assert device_counts(12) == [1, 2, 4, 8, 12]


@pytest.mark.slow
def test_fewest_then_unreachable(capsys):
    """The same 1-device replica: a rate its replica carries 2.5x over needs ceil(2.5) = 3 devices; 1000x what
    4 devices reach needs 4000x the replica's rate -> exit 3 with the best rate (4 replicas) and the need."""
    rc, out = run([*OPT, "--request-rate", "1e-6"], capsys)
    assert rc == 0
    one = json.loads(out)["agg"]
    per_replica = one["tokens_per_s_per_device"] / 8  # requests/s of one 1-device replica (8 output tokens each)
    rc, out = run([*OPT, "--request-rate", str(2.5 * per_replica)], capsys)
    assert rc == 0 and json.loads(out)["agg"]["devices"] == 3
    rate = 1000 * 4 * per_replica
    rc, out = run([*OPT, "--request-rate", str(rate)], capsys)
    assert rc == EXIT_NO_LAYOUT
    got = json.loads(out)["agg"]
    assert got["devices"] is None
    assert got["best_rate_per_s"] == pytest.approx(4 * per_replica, rel=1e-6)
    assert got["devices_needed"] == math.ceil(rate / per_replica - 1e-9)
    assert "groups" in got["why"]


@pytest.mark.slow
def test_attention_dp_engines_searched_below_num_devices(capsys):
    """Qwen3-30B-A3B with EP 4 only, TP 1 on up to 8 GPUs: the attention-DP4/EP4 engine exists at 4 devices
    (not only as the DP8 engine at 8), so a rate one 4-GPU engine carries needs 4 devices."""
    args = ["optimize", "Qwen/Qwen3-30B-A3B", "--device", "h100_sxm", "--num-devices", "8", "--tp-sizes", "1"]
    args += ["--ep-sizes", "4", "--input-length", "128", "--output-length", "8", "--request-rate", "1e-6"]
    rc, out = run(args, capsys)
    assert rc == 0
    assert "agg:    4 devices, 4-device attention-DP engines of TP=1 | PP=1 | DP=4 | EP=4" in out


@pytest.mark.slow
def test_the_answer_at_the_rate_is_serve_configs_open_loop_estimate(capsys):
    """optimize --request-rate's deployment at the rate (1-device replicas, 3 of them) is the open-loop estimate
    of one replica at a third of the rate, rates scaled by 3: utilisation, operating point, TTFT, TPOT."""
    from simcast.core.specs import ParallelSpec
    from simcast.deploy.deployment import Deployment
    from simcast.inputs.loaders import load_device, load_model
    from simcast.serving.steady.model import ServingConfig, Workload
    from simcast.serving.steady.rate import estimate_at_rate, rate_at_p99_limit

    rc, out = run([*OPT, "--request-rate", "1e-6"], capsys)
    per_replica = json.loads(out)["agg"]["tokens_per_s_per_device"] / 8
    rate = 2.5 * per_replica
    rc, out = run([*OPT, "--request-rate", str(rate), "--ttft-limit", "500"], capsys)
    got = json.loads(out)["agg"]
    assert rc == 0 and got["devices"] == 3
    at = got["at_request_rate"]
    one = ServingConfig(
        deployment=Deployment(
            model=load_model("Qwen/Qwen3-8B"), device=load_device("h100_sxm"), parallel=ParallelSpec(), engine="vllm"
        ),
        workload=Workload(input_length=128, output_length=8),
        batch_size=1,
    )
    est = estimate_at_rate(one, rate / 3)
    assert at["devices"] == 3 and at["request_rate"] == pytest.approx(rate)
    assert at["utilisation"] == pytest.approx(est.utilisation, rel=1e-6)
    assert at["capacity_request_rate"] == pytest.approx(3 * est.capacity_per_s, rel=1e-6)
    assert at["concurrency_per_replica"] == est.concurrency
    assert at["mean_ttft_ms"] == pytest.approx(est.ttft_s * 1e3, rel=1e-6)
    assert at["mean_tpot_ms"] == pytest.approx(est.tpot_s * 1e3, rel=1e-6)
    assert at["rate_at_p99_ttft_limit"] == pytest.approx(3 * rate_at_p99_limit(one, 0.5), rel=1e-6)
