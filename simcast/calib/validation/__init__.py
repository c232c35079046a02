"""Validation: predicted vs measured per row (``validate.py``) and the held-out accuracy of the fits on
the measured-kernel database (``db_accuracy.py`` dense, ``db_accuracy_moe.py`` MoE and all-to-all)."""
