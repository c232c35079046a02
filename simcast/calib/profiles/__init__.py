"""Profile writing on a round-trip YAML document (ruamel.yaml): loading, dumping and setting a value with its
provenance note (``profile_doc.py``), what the notes say and their counts (``profile_notes.py``), the values a
calibration run produced (``profile_yaml.py``) and the ``engines:`` kernel sections (``engines_yaml.py``).
The run path never imports this package: profiles are read by :mod:`simcast.inputs.loaders`."""
