"""Adapters that let other agent frameworks keep their long-term memory in SGAM."""
