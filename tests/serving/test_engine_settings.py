"""Engine settings real launch scripts use (SGLang --stream-interval, --scheduler-recv-interval,
--cuda-graph-max-bs; TensorRT-LLM cuda_graph_config.max_batch_size, batch waiting, stream_interval), checked by hand."""

from __future__ import annotations

import pytest

from simcast.core.errors import SimcastInputError
from simcast.core.specs import Batch
from simcast.deploy.deployment import Deployment
from simcast.engines import get_engine
from simcast.engines.policy import engine_policy
from simcast.inputs.loaders import load_device, load_model
from simcast.serving.request_level.intake import OTHER_STEP_WEIGHT, hold_prompts, receive_cutoff
from simcast.serving.request_level.scheduler import Replica, Req, RequestSpec


def _decode(n: int) -> Batch:
    return Batch(query_lens=(1,), context_lens=(100,), counts=(n,))


def test_cuda_graph_max_bs_below_the_batch_runs_it_eagerly() -> None:
    sg = get_engine("sglang")
    assert sg.captured(_decode(64), 80.0, 1)  # default 256 on an 80 GiB GPU at TP 1
    assert not sg.captured(_decode(64), 80.0, 1, settings={"cuda_graph_max_bs": 32})
    assert sg.captured(_decode(32), 80.0, 1, settings={"cuda_graph_max_bs": 32})
    trt = get_engine("trtllm")
    assert trt.capture_limit(80.0, 1) == 128 and not trt.captured(_decode(200), 80.0, 1)
    assert trt.captured(_decode(200), 80.0, 1, settings={"cuda_graph_max_batch_size": 256})


def test_step_spec_carries_the_setting_to_the_graph_rule() -> None:
    from simcast.engines.cuda_graphs import step_captured

    d = Deployment(
        model=load_model("meta-llama/Llama-3.1-8B"),
        device=load_device("h100_sxm"),
        engine="sglang",
        engine_settings=(("cuda_graph_max_bs", 8),),
    )
    assert not step_captured(d.sim_spec(_decode(16)), _decode(16))
    assert step_captured(d.sim_spec(_decode(8)), _decode(8))


def test_a_setting_of_another_engine_is_refused() -> None:
    with pytest.raises(SimcastInputError, match="not a setting of engine vllm"):
        Deployment(
            model=load_model("meta-llama/Llama-3.1-8B"),
            device=load_device("h100_sxm"),
            engine="vllm",
            engine_settings=(("stream_interval", 30),),
        )
    with pytest.raises(SimcastInputError):
        get_engine("sglang").check_settings({"stream_interval": 0})


def _req(i: int, n: int = 100, ready: float = 0.0) -> Req:
    return Req(idx=i, spec=RequestSpec(arrival_s=ready, input_len=n, output_len=10), ready_s=ready)


def test_receive_interval_takes_requests_in_every_n_decode_steps() -> None:
    pol = engine_policy("sglang", load_device("h100_sxm"), settings=(("scheduler_recv_interval", 3),))
    rep = Replica(rid=0, kv_blocks=1000)
    assert receive_cutoff(rep, pol, 1.0) == 1.0  # idle: at once
    rep.running.append(_req(0))
    rep.decode_only = True
    # decode steps count 1 each: intake at the 3rd, the arrivals before it stay unseen
    assert [receive_cutoff(rep, pol, t) for t in (2.0, 3.0, 4.0, 5.0)] == [1.0, 1.0, 4.0, 4.0]
    rep.decode_only = False  # after a prefill step the weight is SGLang's 1000: intake at once
    assert OTHER_STEP_WEIGHT >= 3 and receive_cutoff(rep, pol, 6.0) == 6.0


def test_batch_wait_holds_prompts_until_tokens_or_iterations() -> None:
    settings = (("batch_wait_timeout_iters", 2), ("batch_wait_max_tokens_ratio", 0.5))
    pol = engine_policy("trtllm", load_device("h100_sxm"), settings=settings)
    rep = Replica(rid=0, kv_blocks=1000)
    rep.running.append(_req(0))
    rep.waiting.append(_req(1, n=100))
    # 100 prompt tokens + 1 decode < 0.5 x 8192: held twice, then let through
    assert [hold_prompts(rep, pol, 1.0, 8192) for _ in range(3)] == [True, True, False]
    rep.waiting.append(_req(2, n=5000))  # 5101 >= 4096: no wait
    assert not hold_prompts(rep, pol, 1.0, 8192)
    assert get_engine("trtllm").batch_wait({"batch_wait_max_tokens_ratio": 0.5}) == (0, 0.0)  # iters 0: off


@pytest.mark.slow
@pytest.mark.parametrize(
    ("engine", "interval", "steps_per_gap"),
    [
        # SGLang: tokens 1 (at once), 31 and 61 are sent: two gaps of 30 decode steps each
        ("sglang", 30, 30.0),
        # TensorRT-LLM (py_executor _handle_responses): decoding iterations 1 (the prefill's), 20, 40, 60 and the
        # last (61) send: gaps of 19, 20, 20 and 1 decode steps, mean 60 / 4 = 15
        ("trtllm", 20, 15.0),
    ],
)
def test_stream_interval_delivers_tokens_in_chunks_first_token_at_once(
    engine: str, interval: int, steps_per_gap: float
) -> None:
    from simcast.api.bench import bench_serve

    kw = dict(model="meta-llama/Llama-3.1-8B", device="h100_sxm", engine=engine, input_length=128)
    kw.update(output_length=61, num_prompts=1, request_rate=1.0)
    one = bench_serve(**kw)
    chunked = bench_serve(**kw, engine_settings={"stream_interval": interval})
    assert chunked.summary.ttft.mean_ms == one.summary.ttft.mean_ms
    assert chunked.summary.itl.mean_ms == pytest.approx(steps_per_gap * one.summary.itl.mean_ms, rel=1e-3)
    assert chunked.summary.tpot.mean_ms == pytest.approx(one.summary.tpot.mean_ms, rel=1e-9)
    assert any(a.startswith(f"{engine} stream_interval {interval}:") for a in chunked.assumptions)
    assert not any("stream_interval" in a and a.startswith(engine) for a in one.assumptions)


def test_trtllm_without_padding_captures_only_its_generated_sizes() -> None:
    from simcast.engines.trtllm import capture_sizes

    # llm_args.py _generate_cuda_graph_batch_sizes(128, False): 1..31, 32, 64, 128
    assert sorted(capture_sizes(128)) == [*range(1, 32), 32, 64, 128]
    assert sorted(capture_sizes(1024))[-3:] == [256, 512, 1024]
    trt = get_engine("trtllm")
    off = {"cuda_graph_padding": False}
    assert trt.captured(_decode(32), 80.0, 1, settings=off) and not trt.captured(_decode(48), 80.0, 1, settings=off)
    assert trt.captured(_decode(48), 80.0, 1)  # not given: every batch up to the limit (as with padding)
    assert trt.captured(_decode(48), 80.0, 1, settings={"cuda_graph_padding": True})


def test_trtllm_streams_by_iterations_sglang_by_tokens() -> None:
    from simcast.serving.request_level.intake import stream_gaps

    def sends(engine: str, got: int, steps: int) -> list[int]:
        pol = engine_policy(engine, load_device("h100_sxm"), settings=(("stream_interval", 4),))
        q = Req(idx=0, spec=RequestSpec(arrival_s=0.0, input_len=10, output_len=1000), generated=1)
        out = []
        for k in range(1, steps + 1):  # speculative decoding: `got` tokens per decoding step
            q.generated += got
            q.decode_steps += 1
            if stream_gaps(q, got, float(k), pol, 4) is not None:
                out.append(k)
        return out

    # TensorRT-LLM: iteration k + 1 (the prefill's is 1) sends when it is a multiple of 4, whatever was accepted
    assert sends("trtllm", 3, 12) == [3, 7, 11]
    # SGLang: a step sends when its tokens hold a k with k mod 4 == 1 (tokens 2-4, 5-7: the 2nd step holds 5)
    assert sends("sglang", 3, 8) == [2, 3, 4, 6, 7, 8]
    assert sends("sglang", 1, 8) == [4, 8]  # tokens 5 and 9


def test_stream_interval_is_one_flag_for_both_engines() -> None:
    from simcast.engines import ENGINE_FLAGS

    flags = [f for f in ENGINE_FLAGS if f.name == "--stream-interval"]
    assert len(flags) == 1 and flags[0].engine == "sglang,trtllm" and "TensorRT-LLM" in flags[0].help
    assert get_engine("trtllm").stream_every({"stream_interval": 20}) == 20 and get_engine("vllm").stream_every({}) == 1
    with pytest.raises(SimcastInputError):
        get_engine("trtllm").check_settings({"stream_interval": 0})
