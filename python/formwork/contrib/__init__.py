"""Integrations with inference frameworks: :mod:`formwork.contrib.hf` for ``transformers``."""
