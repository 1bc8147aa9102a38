"""Attack a real Flower federation: capture what the server sees, then invert it.

``capture`` wraps a Flower strategy and writes a capture folder (``format``); the dataset
``flower-capture`` (``dataset``) reads that folder with numpy alone, so attacking a capture
does not need Flower. Only writing a capture and running the example need the ``flower``
extra (``pip install 'vispriv[flower]'``).
"""
