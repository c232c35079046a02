"""The exit codes every ``simcast`` command uses (help epilog, docs/cli.md; one fact in one place)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NO_LAYOUT = 3
EXIT_INTERRUPTED = 130

EXIT_CODES = (
    (EXIT_OK, "success"),
    (
        EXIT_BAD_INPUT,
        "bad input (a flag, YAML key, model config or device profile: one line names it), or an output that "
        "cannot be written",
    ),
    (
        EXIT_NO_LAYOUT,
        "optimize found no layout meeting the limits, or with --request-rate none sustaining the rate within "
        "--num-devices (its table or JSON says why and the best rate reached)",
    ),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
)

EPILOG = "exit codes: " + "; ".join(f"{c} = {what}" for c, what in EXIT_CODES)
