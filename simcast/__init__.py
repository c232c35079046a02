"""simcast: stage-first performance simulation of distributed LLM inference."""

__version__ = "0.1.0"
