"""The RFC's one-line breakdown of a step: ``Mem .. | Comm .. | Cube .. | Vec ..`` (shares of the summed op
time by what bounds each op), ``| PP Compute .. | PP Comm .. | PP Bubble ..`` (shares of the pipeline
latency) when there is a pipeline, and ``| MoE GEMM .. | MoE A2A ..`` for an MoE model. Percentages; the
numbers are the report's (:attr:`simcast.sim.report.Report.op_bound_s`, ``breakdown``, ``moe_share``)."""

from __future__ import annotations

from simcast.sim.report import Report

OP_BOUNDS = ("Mem", "Comm", "Cube", "Vec")
"""The op-bound classes of :attr:`Report.op_bound_s`, in the RFC's order."""


def format_breakdowns(op_bound_s: dict[str, float], pp: dict[str, float] | None) -> str:
    """``Mem .. | Comm .. | Cube .. | Vec .. | PP Compute .. | PP Comm .. | PP Bubble ..`` in percent.

    The op-bound shares are of the summed op time; the PP shares are of
    compute + communication + bubble (the latency).
    """
    tot = sum(op_bound_s.get(k, 0.0) for k in OP_BOUNDS) or 1.0
    parts = [f"{k} {100 * op_bound_s.get(k, 0.0) / tot:.2f}" for k in OP_BOUNDS]
    if pp is not None:
        ptot = (pp["compute"] + pp["communication"] + pp["bubble"]) or 1.0
        parts += [
            f"PP Compute {100 * pp['compute'] / ptot:.2f}",
            f"PP Comm {100 * pp['communication'] / ptot:.2f}",
            f"PP Bubble {100 * pp['bubble'] / ptot:.2f}",
        ]
    return " | ".join(parts)


def breakdown_line(report: Report) -> str:
    """The breakdown line of one simulated step (module docstring); PP shares only when ``pp > 1``."""
    line = format_breakdowns(report.op_bound_s, report.breakdown if report.spec.parallel.pp > 1 else None)
    if report.spec.model.moe is None:
        return line
    share = report.moe_share
    return line + f" | MoE GEMM {100 * share['grouped_gemm']:.2f} | MoE A2A {100 * share['dispatch_combine']:.2f}"
