"""harness: a hardware-portability test and CI harness for LLM inference engines."""

__version__ = "0.1.0"
