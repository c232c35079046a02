"""Measured-data readers: the measured-kernel database (``aic_db.py``), Vidur's profiling CSVs
(``vidur.py``), the generic measured-kernel CSV schema (``measured_schema.py``) and the held-out split of
database rows (``db_split.py``). They turn files into rows of the generic schema; nothing here fits."""
