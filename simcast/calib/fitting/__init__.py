"""Fitting: device efficiencies and links from measured rows (``fit.py``), engine kernel fits
(``fit_kernels.py``), the database's dense and MoE tables into profile sections (``from_db.py``,
``from_db_moe.py``), NCCL transfers for systems without a usable table (``nccl_transfer.py``) and a new
device's profile from one CSV and a template (``template.py``)."""
