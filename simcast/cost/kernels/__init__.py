"""Engine-fitted kernel times: GEMM, attention (one module per kernel rule), MoE, and one-kernel prediction."""
