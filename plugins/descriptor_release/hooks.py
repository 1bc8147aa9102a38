"""Registers the plugins of this scenario (entry point in pyproject.toml)."""
