"""Cost formulas of traced ops: FLOPs and bytes per op and their roofline time (scalar and batched)."""
