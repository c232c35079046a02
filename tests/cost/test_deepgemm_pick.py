"""DeepGEMM's block pick per shape: the memoised scalar rule equals the array rule on every shape."""

from __future__ import annotations

import numpy as np

from simcast.cost.kernels.gemm import _deepgemm_blocks_arrays, deepgemm_block, deepgemm_blocks


def test_the_scalar_pick_is_the_array_pick():
    rng = np.random.default_rng(7)
    m = np.concatenate([np.arange(0, 600, 1.0), rng.integers(1, 200_000, 150).astype(float), [37.5, 0.25]])
    for n in (16, 129, 576, 2048, 7168, 18432, 24576, 32768):
        for sm in (78, 132, 148):
            want = _deepgemm_blocks_arrays(*np.broadcast_arrays(m, np.asarray(float(n))), sm)
            got = deepgemm_blocks(m, n, sm)
            assert all((g == w).all() and g.shape == w.shape for g, w in zip(got, want)), (n, sm)


def test_scalars_and_non_finite_shapes():
    bm, bn = deepgemm_blocks(100, 7168, 132)
    assert np.shape(bm) == () and (float(bm), float(bn)) == deepgemm_block(100.0, 7168.0, 132)
    bm, bn = deepgemm_blocks(np.array([np.nan, 64.0]), 7168, 132)  # NaN: the array rule (no block wins)
    assert bm[0] == 0.0 and bm[1] == deepgemm_block(64.0, 7168.0, 132)[0]
