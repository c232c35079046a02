"""Profile writing: reading a profile's lines with their source comments (``profile_lines.py``),
rewriting a device profile with each new value's provenance (``profile_yaml.py``) and its ``engines:``
kernel sections (``engines_yaml.py``)."""
