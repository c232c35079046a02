"""Roofline cost of traced ops (compute.py) and of collectives and p2p (comm.py)."""
