"""The issue-27 kernel-kind accuracy rows: a database row's prediction is simcast's own op cost (no DB needed)."""

import numpy as np
import pandas as pd
import pytest

from simcast.calib.validation import db_accuracy_kinds as dak
from simcast.inputs.loaders import load_device


def test_linear_decode_row_is_the_recurrent_roofline_by_hand():
    dev = load_device("h100_sxm")
    rows = pd.DataFrame(
        [{"kind": "gdn_rule", "batch": 64, "q_len": 1, "heads": 8, "kv_heads": 4, "head_dim": 128, "v_head_dim": 128,
          "taps": 4, "time_s": 1e-4}]
    )  # fmt: skip
    t = dak.predict_linear(rows, dev)[0]
    # memory-bound: the fp32 state read and written dominates (64 requests x 8 heads x 128 x 128 x 4 B x 2)
    state = 64 * 8 * 128 * 128 * 4 * 2
    io = 64 * (2 * 4 * 128 + 2 * 8 * 128) * 2 + 2 * 64 * 4
    e = dev.efficiency
    assert t == pytest.approx((state + io) / (dev.hbm_bw_bytes_per_s * e.memory) + e.launch_overhead_s)


def test_window_rows_engine_decode_ignores_context_beyond_the_window():
    dev = load_device("b200")
    base = {"kind": "sliding", "phase": "decode", "dtype": "bf16", "window": 128, "batch": 16, "q_len": 1,
            "heads": 8, "kv_heads": 1, "head_dim": 64, "time_s": 1e-5}  # fmt: skip
    rows = pd.DataFrame([{**base, "kv_len": 128}, {**base, "kv_len": 8192}])
    eng = dak.predict_window(rows, dev, "vllm")
    roof = dak.predict_window(rows, dev)
    assert eng[0] == eng[1] and roof[0] == roof[1]  # both read the window's 128 keys, whatever the context
    s = dak.summary(rows.assign(g="x"), np.array([2e-5, 1e-5]), ["g"])
    assert s["rows"].iloc[0] == 2 and s["median_abs_err_pct"].iloc[0] == pytest.approx(50)
