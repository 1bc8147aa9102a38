"""Registers the generic image datasets (entry point ``images``)."""
