"""Communication time: collectives and point-to-point, generic and per-engine fits."""
