"""The rows of ``deepseek_r1_matrix.py``: DeepSeek-R1 deployments as the engines' launch docs and Dynamo's recipes
write them (sources in the matrix script's docstring), each a ``simcast bench-serve`` command with the benchmark
client's settings."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

FP8 = "deepseek-ai/DeepSeek-R1-0528"
NVFP4 = "nvidia/DeepSeek-R1-0528-FP4"
MXFP4 = "amd/DeepSeek-R1-0528-MXFP4"

SGLANG_MTP = (
    "--speculative-algorithm NEXTN --speculative-num-steps {k} --speculative-eagle-topk 1 "
    "--speculative-num-draft-tokens {k1}"
)
"""SGLang's MTP flags for a chain of k drafts (k + 1 tokens verified)."""
VLLM_MTP = '{{"method":"mtp","num_speculative_tokens":{k}}}'
"""vLLM's --speculative-config JSON; TensorRT-LLM's ``decoding_type: MTP, num_nextn_predict_layers: 3`` and
ATOM's ``--method mtp --num-speculative-tokens 3`` mean the same and are written with it."""


@dataclass(frozen=True, kw_only=True)
class Row:
    """One deployment and client setting: ``layout`` the simcast flags of the layout (agg) or of the run
    (disagg, with ``prefill``/``decode`` layouts and worker counts); ``native`` how the engine spells it."""

    id: str
    device: str
    engine: str
    model: str
    layout: str
    isl: int = 1024
    osl: int = 1024
    conc: int = 64
    mtp: int = 0
    prefill: str = ""
    decode: str = ""
    workers: tuple[int, int] = (1, 1)
    range_meaning: str = ""
    native: str = ""
    extra: str = ""
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def disagg(self) -> bool:
        return bool(self.decode)

    def argv(self) -> list[str]:
        """The ``simcast bench-serve`` arguments of this row."""
        a = ["bench-serve", "--model", self.model, "--device", self.device, "--engine", self.engine]
        a += self.layout.split()
        if self.disagg:
            a += ["--serving-mode", "disagg", "--prefill-workers", str(self.workers[0])]
            a += ["--decode-workers", str(self.workers[1]), "--prefill-layout", self.prefill]
            a += ["--decode-layout", self.decode]
        if self.mtp and "sglang" in self.engine:
            a += SGLANG_MTP.format(k=self.mtp, k1=self.mtp + 1).split()
        elif self.mtp:
            a += ["--speculative-config", VLLM_MTP.format(k=self.mtp)]
        a += ["--dataset-name", "random", "--random-input-len", str(self.isl), "--random-output-len", str(self.osl)]
        a += ["--request-rate", "inf", "--max-concurrency", str(self.conc), "--num-prompts", str(10 * self.conc)]
        a += ["--ignore-eos"]
        if self.range_meaning:
            a += ["--random-range-ratio", "0.8", "--random-range-ratio-meaning", self.range_meaning]
        return a + self.extra.split()

    def gpus(self) -> int:
        """GPUs of the deployment: the layout's world size, or P prefill + D decode workers' GPUs."""
        if not self.disagg:
            return _world(_flags(self.layout))
        return self.workers[0] * _world(_kv(self.prefill)) + self.workers[1] * _world(_kv(self.decode))

    def decode_layout(self) -> dict[str, str]:
        """The decode engine's layout keys (tp, dp, ep; dp_attention when the dp ranks are attention-DP)."""
        kv = _kv(self.decode) if self.disagg else _flags(self.layout)
        if kv.get("enable_expert_parallel") == "true":
            kv["dp_attention"] = "true"
        return kv


def _flags(layout: str) -> dict[str, str]:
    """``--tp 1 --dp 8 --dp-attention`` -> {tp: 1, dp: 8, dp_attention: true}."""
    toks, out = layout.split(), {}
    for i, t in enumerate(toks):
        if t in ("--tp", "--dp", "--ep", "--pp"):
            out[t[2:]] = toks[i + 1]
        elif t in ("--dp-attention", "--enable-expert-parallel"):
            out[t[2:].replace("-", "_")] = "true"
    return out


def _kv(text: str) -> dict[str, str]:
    """``tp=1,dp=8`` (or ``tp,1,dp,8``) -> a dict."""
    if "=" in text:
        return dict(p.split("=", 1) for p in text.split(",") if p)
    parts = [p for p in text.split(",") if p]
    return dict(zip(parts[::2], parts[1::2]))


def _world(kv: dict[str, str]) -> int:
    return int(kv.get("tp", 1)) * int(kv.get("dp", 1)) * int(kv.get("pp", 1))


def _agg_rows() -> list[Row]:
    """Single-node (and H100's two-node) aggregated deployments."""
    rows: list[Row] = []
    tp8 = "--tp 8"
    dep8 = "--tp 1 --dp 8 --dp-attention --ep 8"
    dep8_native = "SGLang --tp-size 8 --dp-size 8 --enable-dp-attention --ep-size 8"
    for dev in ("h200", "b200", "b300", "mi300x", "mi325x", "mi355x"):
        rows.append(Row(id=f"{dev}-sglang-fp8-tp8", device=dev, engine="sglang", model=FP8, layout=tp8))
        rows.append(Row(id=f"{dev}-sglang-fp8-tp8-mtp", device=dev, engine="sglang", model=FP8, layout=tp8, mtp=3))
    rows.append(Row(id="h100-sglang-fp8-tp16", device="h100", engine="sglang", model=FP8, layout="--tp 16"))
    for dev in ("h200", "b200", "b300"):
        rows.append(
            Row(id=f"{dev}-sglang-fp8-dep8", device=dev, engine="sglang", model=FP8, layout=dep8, native=dep8_native)
        )
        rows.append(Row(id=f"{dev}-trtllm-fp8-tp8-ep8", device=dev, engine="trtllm", model=FP8, layout="--tp 8 --ep 8"))
        rows.append(Row(id=f"{dev}-trtllm-fp8-dep8-mtp", device=dev, engine="trtllm", model=FP8, layout=dep8, mtp=3))
        rows.append(Row(id=f"{dev}-vllm-fp8-tp8", device=dev, engine="vllm", model=FP8, layout=tp8))
        rows.append(
            Row(
                id=f"{dev}-vllm-fp8-dp8-ep",
                device=dev,
                engine="vllm",
                model=FP8,
                layout="--tp 1 --dp 8 --enable-expert-parallel",
            )
        )
    for dev in ("b200", "b300"):
        for eng in ("sglang", "trtllm"):
            rows.append(Row(id=f"{dev}-{eng}-fp4-tp8", device=dev, engine=eng, model=NVFP4, layout=tp8))
            rows.append(Row(id=f"{dev}-{eng}-fp4-tp8-mtp", device=dev, engine=eng, model=NVFP4, layout=tp8, mtp=3))
        rows.append(Row(id=f"{dev}-trtllm-fp4-dep8", device=dev, engine="trtllm", model=NVFP4, layout=dep8))
    for dev in ("gb200", "gb300"):
        rows.append(Row(id=f"{dev}-trtllm-fp4-tp4", device=dev, engine="trtllm", model=NVFP4, layout="--tp 4"))
    for dev in ("mi300x", "mi325x", "mi355x"):
        rows.append(Row(id=f"{dev}-atom-fp8-tp8", device=dev, engine="atom", model=FP8, layout=tp8))
        rows.append(Row(id=f"{dev}-vllm-fp8-tp8", device=dev, engine="vllm", model=FP8, layout=tp8))
    rows.append(Row(id="mi355x-atom-fp4-tp8", device="mi355x", engine="atom", model=MXFP4, layout=tp8))
    rows.append(Row(id="mi355x-atom-fp4-tp8-mtp", device="mi355x", engine="atom", model=MXFP4, layout=tp8, mtp=3))
    rows.append(Row(id="mi355x-sglang-fp4-tp8", device="mi355x", engine="sglang", model=MXFP4, layout=tp8))
    return rows


def _disagg_rows() -> list[Row]:
    """Multi-node disaggregated deployments (Dynamo recipes, SGLang PD, TensorRT-LLM disaggregated)."""
    dep = "tp=1,dp={n},dp_attention=true,ep={n}"
    rows: list[Row] = []
    for dev in ("gb200", "gb300"):
        for mtp in (0, 3):
            sfx = "-mtp" if mtp else ""
            rows.append(
                Row(
                    id=f"{dev}-dynamo-trtllm-fp4-1p-dep4-1d-dep32{sfx}",
                    device=dev,
                    engine="dynamo-trtllm",
                    model=NVFP4,
                    layout="--kv-cache-dtype fp8",
                    prefill=dep.format(n=4),
                    decode=dep.format(n=32),
                    mtp=mtp,
                    native="TensorRT-LLM extra-engine-args: tensor_parallel_size 4/32, moe_expert_parallel_size "
                    "4/32, enable_attention_dp true",
                )
            )
            rows.append(
                Row(
                    id=f"{dev}-dynamo-trtllm-fp4-4p-dep4-1d-dep8{sfx}",
                    device=dev,
                    engine="dynamo-trtllm",
                    model=NVFP4,
                    layout="--kv-cache-dtype fp8",
                    prefill=dep.format(n=4),
                    decode=dep.format(n=8),
                    workers=(4, 1),
                    mtp=mtp,
                )
            )
        rows.append(
            Row(
                id=f"{dev}-dynamo-sglang-fp8-2p-dep8-1d-dep48",
                device=dev,
                engine="dynamo-sglang",
                model=FP8,
                layout="--moe-a2a-backend deepep",
                prefill=dep.format(n=8),
                decode=dep.format(n=48),
                workers=(2, 1),
                native="SGLang --tp-size 48 --dp-size 48 --enable-dp-attention --ep-size 48 --moe-a2a-backend deepep",
            )
        )
    for dev in ("h100", "h200"):
        rows.append(
            Row(
                id=f"{dev}-dynamo-sglang-fp8-1p-tep16-1d-dep16",
                device=dev,
                engine="dynamo-sglang",
                model=FP8,
                layout="--moe-a2a-backend deepep",
                prefill="tp=16,ep=16",
                decode=dep.format(n=16),
                native="recipes/deepseek-r1/sglang-wideep/tep16p-dep16d-disagg.yaml",
            )
        )
        rows.append(
            Row(
                id=f"{dev}-dynamo-vllm-fp8-1p-dep16-1d-dep16",
                device=dev,
                engine="dynamo-vllm",
                model=FP8,
                layout="",
                prefill="tp=1,dp=16,enable_expert_parallel=true",
                decode="tp=1,dp=16,enable_expert_parallel=true",
            )
        )
    for dev in ("b200", "b300", "h200"):
        for mtp in (0, 3):
            rows.append(
                Row(
                    id=f"{dev}-sglang-fp8-1p-tp8-1d-dep8" + ("-mtp" if mtp else ""),
                    device=dev,
                    engine="sglang",
                    model=FP8,
                    layout="",
                    prefill="tp=8",
                    decode=dep.format(n=8),
                    mtp=mtp,
                )
            )
    rows.append(
        Row(
            id="gb200-dynamo-vllm-fp4-2p-dep4-1d-dep8",
            device="gb200",
            engine="dynamo-vllm",
            model=NVFP4,
            layout="",
            prefill="tp=1,dp=4,enable_expert_parallel=true",
            decode="tp=1,dp=8,enable_expert_parallel=true",
            workers=(2, 1),
        )
    )
    rows.append(
        Row(
            id="mi355x-sglang-fp8-1p-tp8-1d-tp8",
            device="mi355x",
            engine="sglang",
            model=FP8,
            layout="",
            prefill="tp=8",
            decode="tp=8",
        )
    )
    return rows


def _with_client(rows: list[Row], settings: list[tuple[int, int, int, str]]) -> list[Row]:
    """Each row under each client setting (ISL, OSL, concurrency, range meaning)."""
    out = []
    for r in rows:
        for isl, osl, conc, rm in settings:
            tag = f"-{isl // 1024}k{osl // 1024}k-c{conc}" + ("-rr08" if rm else "")
            out.append(replace(r, id=r.id + tag, isl=isl, osl=osl, conc=conc, range_meaning=rm))
    return out


def matrix(kind: str) -> list[Row]:
    """``quick``: one row per engine family; ``default``: :data:`DEFAULT_ROWS` at 1k/1k; ``full``: the cross product
    with 1k/1k, 1k/8k, 8k/1k at several concurrencies and the lower-bound range meaning."""
    base = _agg_rows() + _disagg_rows()
    if kind == "full":
        settings = [(1024, 1024, c, "") for c in (4, 64, 256)]
        settings += [(1024, 8192, 64, ""), (8192, 1024, 64, ""), (1024, 1024, 64, "lower-bound")]
        return _with_client(base, settings)
    if kind == "quick":
        keep = (
            "h200-sglang-fp8-tp8-mtp",
            "b200-trtllm-fp8-dep8-mtp",
            "mi355x-atom-fp4-tp8",
            "gb200-dynamo-trtllm-fp4-1p-dep4-1d-dep32-mtp",
            "h200-dynamo-sglang-fp8-1p-tep16-1d-dep16",
            "b300-sglang-fp4-tp8",
        )
        return _with_client([r for r in base if r.id in keep], [(1024, 1024, 32, "lower-bound")])
    return _with_client([r for r in base if r.id in DEFAULT_ROWS], [(1024, 1024, 32, "")])


DEFAULT_ROWS = (
    "h200-sglang-fp8-tp8",
    "b200-sglang-fp8-tp8-mtp",
    "mi300x-sglang-fp8-tp8",
    "mi325x-sglang-fp8-tp8-mtp",
    "h100-sglang-fp8-tp16",
    "h200-trtllm-fp8-dep8-mtp",
    "b200-sglang-fp8-dep8",
    "b200-vllm-fp8-tp8",
    "b300-trtllm-fp8-tp8-ep8",
    "b200-trtllm-fp4-tp8",
    "b300-sglang-fp4-tp8",
    "b300-trtllm-fp4-tp8-mtp",
    "gb300-trtllm-fp4-tp4",
    "mi325x-atom-fp8-tp8",
    "mi355x-vllm-fp8-tp8",
    "mi355x-sglang-fp4-tp8",
    "mi355x-atom-fp4-tp8-mtp",
    "gb200-dynamo-trtllm-fp4-1p-dep4-1d-dep32-mtp",
    "gb200-dynamo-trtllm-fp4-4p-dep4-1d-dep8-mtp",
    "gb300-dynamo-trtllm-fp4-4p-dep4-1d-dep8",
    "b200-sglang-fp8-1p-tp8-1d-dep8",
    "b300-sglang-fp8-1p-tp8-1d-dep8-mtp",
    "gb200-dynamo-vllm-fp4-2p-dep4-1d-dep8",
    "h100-dynamo-vllm-fp8-1p-dep16-1d-dep16",
    "mi355x-sglang-fp8-1p-tp8-1d-tp8",
)
"""The default run: every device, engine and serving mode at least once, the slowest-to-simulate layouts (the
DEP32/DEP48 decode pools without MTP, TEP16 prefill) left to ``--full`` (and ``--quick`` keeps one TEP16 row)."""
