"""Runnable examples: ``python -m leanpass.examples.<name>``."""
