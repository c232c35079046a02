"""Time a :class:`~simcast.calib.ondevice.bench_plan.Plan` on this machine with torch (the measuring edge).

This module runs kernels and reads the device's properties; it writes no files (``simcast
microbench`` in :mod:`simcast.cli.microbench` writes the CSV) and fits nothing (``simcast calibrate``
does, in :mod:`simcast.calib.fitting.fit`). torch is imported inside the functions, so importing this module
stays cheap.

A backend is a small adapter (:class:`Backend`): how to find and count its devices, synchronise,
time a call (device events where the backend has them, else ``time.perf_counter`` around a
synchronised call), flush the cache between repeats and which ``torch.distributed`` backend its
collectives use. ``cuda`` also covers ROCm (HIP builds of torch expose ``torch.cuda``; its ``nccl``
process group is RCCL); ``xpu`` and ``npu`` (``torch_npu``) follow the same calls.
"""

from __future__ import annotations

import importlib
import os
import socket
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from simcast.calib.ondevice.bench_plan import Case, Timing
from simcast.core.errors import SimcastInputError, require

BACKENDS = ("cpu", "cuda", "xpu", "npu")
_DIST = {"cpu": "gloo", "cuda": "nccl", "xpu": "xccl", "npu": "hccl"}
_FLUSH_BYTES = 256 * 2**20  # larger than any current GPU's L2, so each repeat reads its weights from HBM


@dataclass(frozen=True, kw_only=True)
class Backend:
    """One kind of device torch drives: ``name`` is ``cpu``, ``cuda``, ``xpu`` or ``npu``."""

    name: str

    @property
    def dist_backend(self) -> str:
        """The ``torch.distributed`` backend of its collectives (nccl is RCCL on ROCm builds)."""
        return _DIST[self.name]

    def module(self) -> Any:
        """``torch.cuda`` / ``torch.xpu`` / ``torch.npu`` (None for the CPU)."""
        import torch

        if self.name == "npu":
            importlib.import_module("torch_npu")  # registers torch.npu (Ascend's separate package)
        return None if self.name == "cpu" else getattr(torch, self.name)

    def available(self) -> bool:
        if self.name == "cpu":
            return True
        try:
            mod = self.module()
        except ImportError:
            return False
        return mod is not None and bool(mod.is_available())

    def count(self) -> int:
        """Devices visible (the CPU counts as one)."""
        return 1 if self.name == "cpu" else int(self.module().device_count())

    def device(self, index: int = 0) -> Any:
        import torch

        return torch.device("cpu") if self.name == "cpu" else torch.device(self.name, index)

    def sync(self) -> None:
        if self.name != "cpu":
            self.module().synchronize()

    def time_calls(self, fn: Callable[[], object], n: int, flush: Any = None) -> list[float]:
        """Seconds of each of ``n`` calls of ``fn``: device events around each call where the backend has
        them, else ``perf_counter`` around a synchronised call. ``flush`` (a buffer) is zeroed before each
        call, outside the timed span."""
        mod = None if self.name == "cpu" else self.module()
        if mod is not None and hasattr(mod, "Event"):
            pairs = []
            for _ in range(n):
                if flush is not None:
                    flush.zero_()
                start, end = mod.Event(enable_timing=True), mod.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                pairs.append((start, end))
            mod.synchronize()
            return [s.elapsed_time(e) * 1e-3 for s, e in pairs]
        out = []
        for _ in range(n):
            if flush is not None:
                flush.zero_()
            self.sync()
            t0 = time.perf_counter()
            fn()
            self.sync()
            out.append(time.perf_counter() - t0)
        return out


def resolve_backend(name: str) -> Backend:
    """``auto`` → the first available of cuda, xpu, npu, else cpu; a named backend must be available."""
    allowed = ("auto", *BACKENDS)
    require(name in allowed, "--device", name, f"allowed: {', '.join(allowed)}")
    if name == "auto":
        return next(
            (b for b in (Backend(name=n) for n in ("cuda", "xpu", "npu")) if b.available()), Backend(name="cpu")
        )
    be = Backend(name=name)
    usable = [n for n in BACKENDS if Backend(name=n).available()]
    require(be.available(), "--device", name, f"not available on this machine; available: {', '.join(usable)}")
    return be


# ------------------------------------------------------------------ what was measured on
def environment(be: Backend) -> dict[str, object]:
    """Device name, count, memory (bytes) and software versions, as the CSV's metadata columns hold them."""
    import torch

    info: dict[str, object] = {"backend": be.name, "torch": torch.__version__, "gpu_count": be.count()}
    if be.name == "cpu":
        info.update(
            gpu_name=_cpu_name(),
            memory_bytes=os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
            runtime=f"cpu, {torch.get_num_threads()} threads",
            driver="",
        )
        return info
    mod = be.module()
    props = mod.get_device_properties(0)
    info.update(gpu_name=str(props.name), memory_bytes=int(props.total_memory), driver=_driver(be))
    if be.name == "cuda":
        hip = getattr(torch.version, "hip", None)
        info["runtime"] = f"rocm {hip}" if hip else f"cuda {torch.version.cuda}"
    elif be.name == "xpu":
        info["runtime"] = f"xpu {getattr(torch.version, 'xpu', '')}".strip()
    else:
        npu = importlib.import_module("torch_npu")
        info["runtime"] = f"torch_npu {getattr(npu, '__version__', '')}".strip()
    return info


def _cpu_name() -> str:
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:  # not a user file: the kernel's description of the CPU
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def _driver(be: Backend) -> str:
    """The kernel driver's version where the vendor tool reports it (nvidia-smi), else the driver API's."""
    import shutil
    import subprocess

    import torch

    if be.name == "cuda" and not getattr(torch.version, "hip", None) and shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
                check=True,
            )
            return out.stdout.splitlines()[0].strip()
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    get = getattr(torch._C, "_cuda_getDriverVersion", None) if be.name == "cuda" else None
    return f"driver API {get()}" if get is not None else ""


# ------------------------------------------------------------------ one case
def fp8_dtype(be: Backend) -> tuple[Any, str]:
    """The fp8 element type ``torch._scaled_mm`` runs on this device, or (None, why not)."""
    import torch

    if not hasattr(torch, "_scaled_mm"):
        return None, f"torch {torch.__version__} has no torch._scaled_mm"
    why = ""
    for name in ("float8_e4m3fn", "float8_e4m3fnuz"):
        dt = getattr(torch, name, None)
        if dt is None:
            continue
        try:
            dev = be.device()
            a = torch.ones(16, 32, device=dev).to(dt)
            s = torch.ones((), device=dev)
            torch._scaled_mm(a, a.t(), scale_a=s, scale_b=s, out_dtype=torch.bfloat16)
            be.sync()
            return dt, ""
        except (RuntimeError, TypeError, NotImplementedError) as e:
            why = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
    return None, f"torch._scaled_mm does not run here ({why})"


def kernel_for(case: Case, be: Backend, fp8: Any = None) -> Callable[[], object]:
    """A closure that runs ``case`` once on ``be`` (inputs allocated here, outside the timed calls)."""
    import torch
    import torch.nn.functional as F

    dev = be.device()
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(case.dtype, torch.bfloat16)
    if case.kind == "gemm":
        m, n, k = _n(case.m), _n(case.n), _n(case.k)
        x, w = torch.randn(m, k, device=dev, dtype=half), torch.randn(n, k, device=dev, dtype=half)
        if case.dtype == "fp8":
            require(fp8 is not None, "dtype", case.dtype, "needs torch._scaled_mm on this device")
            x8, w8, s = x.to(fp8), w.to(fp8), torch.ones((), device=dev)
            return lambda: torch._scaled_mm(x8, w8.t(), scale_a=s, scale_b=s, out_dtype=torch.bfloat16)
        out = torch.empty(m, n, device=dev, dtype=half)
        wt = w.t()  # (K, N) view of the (N, K) weight: what F.linear hands to the BLAS
        return lambda: torch.mm(x, wt, out=out)
    if case.kind.startswith("attention"):
        b, h, kv, d = _n(case.batch), _n(case.heads), _n(case.kv_heads), _n(case.head_dim)
        q = torch.randn(b, h, _n(case.q_len), d, device=dev, dtype=half)
        key = torch.randn(b, kv, _n(case.kv_len), d, device=dev, dtype=half)
        val = torch.randn_like(key)
        causal = case.kind == "attention_prefill"  # decode: the one new token sees every cached key
        try:
            F.scaled_dot_product_attention(q[:, :, :1], key[:, :, :1], val[:, :, :1], enable_gqa=h != kv)
        except TypeError:  # torch < 2.5: no enable_gqa; repeat the KV heads (outside the timed call)
            key, val = key.repeat_interleave(h // kv, 1), val.repeat_interleave(h // kv, 1)
            return lambda: F.scaled_dot_product_attention(q, key, val, is_causal=causal)
        return lambda: F.scaled_dot_product_attention(q, key, val, is_causal=causal, enable_gqa=h != kv)
    if case.kind == "add":
        a = torch.randn(_n(case.m), _n(case.n), device=dev, dtype=half)
        c, out = torch.randn_like(a), torch.empty_like(a)
        return lambda: torch.add(a, c, out=out)
    raise SimcastInputError("kind", case.kind, "microbench times gemm, attention_prefill, attention_decode, add")


def _n(v: int | None) -> int:
    assert v is not None
    return v


def time_case(fn: Callable[[], object], be: Backend, timing: Timing, flush: Any = None) -> float:
    """Median seconds of one call: ``timing.warmup`` calls, one timed call to size the repeats, then the repeats."""
    for _ in range(timing.warmup):
        fn()
    be.sync()
    first = be.time_calls(fn, 1, flush)[0]
    return statistics.median(be.time_calls(fn, timing.reps(first), flush))


def flush_buffer(be: Backend) -> Any:
    """A buffer to zero between repeats (accelerators: evicts the L2, so weights come from HBM as in a real
    forward pass over many layers); None on the CPU, whose caches a memset would not model."""
    import torch

    return None if be.name == "cpu" else torch.empty(_FLUSH_BYTES, dtype=torch.uint8, device=be.device())


def measure(
    cases: Iterable[Case], be: Backend, timing: Timing, fp8: Any = None, progress: Callable[[int], None] | None = None
) -> tuple[list[tuple[Case, float]], list[str]]:
    """``(case, median seconds)`` of every compute case that ran, and one note per kind with cases that did
    not (out of memory, unsupported: the first error, with the count)."""
    import torch

    flush = flush_buffer(be)
    done: list[tuple[Case, float]] = []
    failed: dict[str, tuple[int, str]] = {}
    for i, c in enumerate(cases):
        try:
            done.append((c, time_case(kernel_for(c, be, fp8), be, timing, flush)))
        except (RuntimeError, torch.OutOfMemoryError, SimcastInputError) as e:
            n, first = failed.get(f"{c.kind} {c.dtype}", (0, str(e).strip().splitlines()[0][:160] if str(e) else ""))
            failed[f"{c.kind} {c.dtype}"] = (n + 1, first)
            if be.name != "cpu":
                be.module().empty_cache()
        if progress is not None:
            progress(i + 1)
    return done, [f"{k}: {n} case(s) skipped ({why})" for k, (n, why) in failed.items()]


# ------------------------------------------------------------------ all-reduce
def measure_allreduce(be: Backend, gpus: int, sizes: tuple[int, ...], timing: Timing) -> list[float]:
    """Median seconds of a bf16 sum all-reduce of each message size (bytes per rank) over ``gpus`` ranks:
    one process per device (``torch.multiprocessing``), the slowest rank's median per size."""
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    port = _free_port()
    mp.start_processes(
        _allreduce_worker,
        args=(gpus, be.name, tuple(sizes), timing, port, queue),
        nprocs=gpus,
        join=True,
        start_method="spawn",
    )
    return list(queue.get())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _allreduce_worker(
    rank: int, world: int, name: str, sizes: tuple[int, ...], timing: Timing, port: int, queue: Any
) -> None:
    import torch
    import torch.distributed as dist

    be = Backend(name=name)
    if name != "cpu":
        be.module().set_device(rank)
    dist.init_process_group(be.dist_backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        dev = be.device(rank if name != "cpu" else 0)
        medians = []
        for nbytes in sizes:
            x = torch.ones(max(nbytes // 2, 1), dtype=torch.bfloat16, device=dev)

            def once(x: Any = x) -> None:
                dist.all_reduce(x)

            for _ in range(timing.warmup):
                once()
            dist.barrier()
            first = torch.tensor([be.time_calls(once, 1)[0]], dtype=torch.float64, device=dev)
            dist.all_reduce(first, op=dist.ReduceOp.MAX)  # every rank must run the same number of repeats
            times = []
            for _ in range(timing.reps(float(first.item()))):
                dist.barrier()  # every rank starts together: the time is the collective's, not a late rank's
                times += be.time_calls(once, 1)
            t = torch.tensor([statistics.median(times)], dtype=torch.float64, device=dev)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            medians.append(float(t.item()))
        if rank == 0:
            queue.put(medians)
    finally:
        dist.destroy_process_group()
