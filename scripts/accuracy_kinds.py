"""The "New kernel kinds (issue 27)" section of docs/accuracy.md: FP4 GEMM, FP4 MoE, linear attention (gated
DeltaNet, KDA) and sliding-window attention, each with its held-out error and source table.

Called by scripts/accuracy.py (the full page). Run alone (`python scripts/accuracy_kinds.py [docs/accuracy.md]`)
it regenerates just this section in place: the page's text from its heading to the next `## ` heading is
replaced by this generator's output.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
from accuracy_db import DEVICES  # (database system, shipped profile): one list for both sections

from simcast.render.text import markdown_table

HEADING = "## New kernel kinds (issue 27)"


def _cell(med: float, p90: float) -> str:
    return f"{med:.1f} / {p90:.1f}"


def _pivot(long: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """Rows ``index``, one column per device: "median / p90 (rows)"."""
    long = long.assign(cell=[f"{_cell(a, b)} ({int(n)})" for a, b, n in long[["median", "p90", "rows"]].to_numpy()])
    wide = long.pivot_table(index=index, columns="device", values="cell", aggfunc="first", sort=False)
    cols = [p for _, p in DEVICES if p in wide.columns]
    return wide[cols].fillna("–").reset_index()


def _fp4(devs) -> pd.DataFrame:
    """FP4 GEMM and FP4 MoE held-out rows of the engines whose profile section holds an nvfp4 fit (odd CRC32
    half)."""
    from simcast.calib.fitting.from_db import engine_data
    from simcast.calib.readers.db_split import held_out
    from simcast.calib.validation import db_accuracy_moe as dam
    from simcast.calib.validation.validate import predict_frame
    from simcast.engines import ENGINES

    out = []
    for system, dev in devs:
        for e in ENGINES:
            fits = dev.engines.get(e)
            g = engine_data(system, e).gemm if fits and fits.gemm_fit("nvfp4") else pd.DataFrame()
            g = g[g["dtype"] == "nvfp4"] if len(g) else g
            if len(g):
                test = g[held_out(g)]
                err = predict_frame(test, dev)["abs_err_pct"].dropna()
                src = ", ".join(sorted({s.split("/", 2)[2] for s in test["source"]}))  # aiconfigurator/<system>/...
                out.append(("FP4 GEMM (nvfp4)", dev.name, e, len(err), err.median(), err.quantile(0.9), src))
            for r in dam.moe_errors(system, dev, e):
                if r["kind"] == "experts nvfp4":
                    med, p90 = r["median_abs_err_pct"], r["p90_abs_err_pct"]
                    out.append(("FP4 MoE (nvfp4 experts)", dev.name, e, r["rows"], med, p90, f"moe/{e}/moe_perf"))
    return pd.DataFrame(out, columns=["kind", "device", "engine", "rows", "median", "p90", "table"])


def _linear(devs) -> pd.DataFrame:
    from simcast.calib.validation import db_accuracy_kinds as dak
    from simcast.engines import ENGINES

    parts = []
    for system, dev in devs:
        for kind in ("gdn", "kda"):
            t = dak.held_out_linear(system, dev, ENGINES, kind)
            if len(t):
                parts.append(t.assign(device=dev.name))
    t = pd.concat(parts, ignore_index=True)
    label = {"gdn": "gated DeltaNet", "kda": "KDA (as gated DeltaNet)"}
    return pd.DataFrame(
        {
            "kind": [label[k.split("_")[0]] for k in t["kind"]],
            "kernel": [("conv1d" if k.endswith("_conv") else "delta rule") for k in t["kind"]],
            "device": t["device"],
            "engine": t["engine"],
            "phase": t["phase"],
            "rows": t["rows"],
            "median": t["median_abs_err_pct"],
            "p90": t["p90_abs_err_pct"],
            "table": [s.split("/", 1)[1] for s in t["source"]],
        }
    )


def _window(devs) -> pd.DataFrame:
    from simcast.calib.validation import db_accuracy_kinds as dak
    from simcast.engines import ENGINES

    parts = [dak.held_out_window(s, d, ENGINES).assign(device=d.name) for s, d in devs]
    t = pd.concat([p for p in parts if len(p)], ignore_index=True)
    return t.rename(columns={"median_abs_err_pct": "median", "p90_abs_err_pct": "p90"})


def _tables(t: pd.DataFrame) -> str:
    """The distinct source tables of ``t`` per engine, for the prose under a table."""
    by = t.groupby("engine")["table"].agg(lambda s: ", ".join(sorted(set(s))))
    return "; ".join(f"{e}: `{v}`" for e, v in by.items())


def kinds_markdown() -> list[str]:
    """Markdown lines of the section (a note when the optional extra is missing)."""
    from simcast.calib.readers import aic_db
    from simcast.inputs.loaders import load_device

    if not aic_db.available():
        return [
            HEADING,
            "",
            "Not regenerated: the optional extra is not installed (pip install 'simcast[measured]').",
            "",
        ]
    devs = [(s, load_device(p)) for s, p in DEVICES]
    fp4, lin, win = _fp4(devs), _linear(devs), _window(devs)
    win = win.assign(table=win["source"].str.split("/", n=1).str[1])
    md = [
        HEADING,
        "",
        f"aiconfigurator-core {aic_db.package_version()}; every figure is on rows no fit saw. Cells: median / p90 "
        "absolute % error (held-out rows). Split: the CRC32 shape hash of every database table "
        "(`simcast.calib.readers.db_split.held_out`): odd rows below; fits, where a kind has one, used the even "
        "rows only.",
        "",
        "### FP4 GEMM and FP4 MoE (fitted on the even half)",
        "",
        "NVFP4 GEMMs (`gemm_perf`, `gemm_dtype == nvfp4`) and fused-MoE expert GEMMs (`moe_perf`, nvfp4, "
        "balanced routing, main kernel): the profiles' `nvfp4` fits (`scripts/fit_fp4_from_db.py`, even half).",
        "",
        markdown_table(_pivot(fp4, ["kind", "engine"])),
        "",
        f"Source tables: {_tables(fp4)}.",
        "",
        "### Linear attention: gated DeltaNet and KDA (unfitted: roofline)",
        "",
        "One kernel launch per row, predicted by simcast's own op formulas (`simcast.cost.ops.linear_attention`: "
        "`gated_delta_rule`, `causal_conv1d`) at the row's per-rank heads, timed by the device roofline (no engine "
        "has a fitted kernel for them; simcast's GDN layers run on the roofline with or without `--engine`). "
        "prefill = the database's `context` rows (fresh requests of `seq_len` tokens: `chunk_gated_delta_rule` "
        "/ `chunk_kda` / `flashkda_fwd` and `causal_conv1d_fn`); decode = `generation` rows (one token: the fused "
        "recurrent kernels and `causal_conv1d_update`); verify = KDA's 2-8-token MTP verify rows. simcast has no "
        "KDA model: its rows are costed as the gated delta rule at the same heads and head sizes (a transfer). "
        "Where several kernels time the same shape (KDA decode) every one is a row. Not read: h100_sxm and "
        "h200_sxm `linear_attention/vllm/0.24.0` (kept out with the reserved vLLM 0.24 attention tables).",
        "",
        markdown_table(_pivot(lin, ["kind", "kernel", "engine", "phase"])),
        "",
        f"Source tables: {_tables(lin)}.",
        "",
        "### Sliding-window attention (gpt-oss: 128-token window, sinks)",
        "",
        "The attention tables' `window_size > 0` rows (windows 128, 512, 1024, 8192; beam 1; bf16 or fp8 KV); no "
        "fit has seen them (the attention fits use the `window_size == 0` rows). The tables carry no "
        "attention-sink dimension: a sink adds one logit per head and query (simcast charges nothing for it). "
        "`roofline`: simcast's `attention_sliding` formula on the device roofline (what `--engine` ran before "
        "this section); `engine`: the engine's fitted full-attention kernel on the window-capped requests "
        "(`simcast.cost.ops.attention_ops.window_batch`: a decode reads min(context + 1, window) keys, prefill "
        "queries past the window run as pieces of <= window queries whose mean visible keys are the window), "
        "what `--engine` runs now. Every kernel the tables time for a shape is a row.",
        "",
        markdown_table(_pivot(win, ["engine", "phase", "windows", "model"])),
        "",
        f"Source tables: {_tables(win)}.",
        "",
    ]
    return md


def splice(page: str, section: list[str]) -> str:
    """``page`` with the section's old text (its heading to the next ``## ``) replaced, or appended."""
    text = "\n".join(section)
    if HEADING not in page:
        return page.rstrip("\n") + "\n\n" + text
    head, rest = page.split(HEADING, 1)
    nxt = rest.find("\n## ")
    tail = rest[nxt + 1 :] if nxt >= 0 else ""
    return head + text + ("\n" + tail if tail else "")


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "docs" / "accuracy.md"
    out.write_text(splice(out.read_text(), kinds_markdown()))
    print(f"wrote {out}")
