"""SGAM."""
