"""Machine code for a plugin's inner loop where numba is installed (the optional ``fast`` extra).

A plugin keeps a plain numpy/torch path as the reference and, beside it, a loop compiled by
numba that takes the same decisions or computes the same bits (its tests compare the two).
:func:`enabled` says whether the compiled loop may run: numba importable, and the plugin's
environment switch (``VISPRIV_BUDGET_KERNEL``, ``VISPRIV_LBFGS_KERNEL``) not ``0``, which is
how a benchmark times the reference in the same process. :func:`jit` compiles on the first call
and caches the machine code on disk for later processes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

try:
    import numba
except ImportError:  # the optional ``fast`` extra
    numba = None


def enabled(switch: str) -> bool:
    """Whether a compiled loop may run: numba installed and the environment variable ``switch``
    not set to ``0``."""
    return numba is not None and os.environ.get(switch, "1") != "0"


def jit(function: Callable) -> Any:
    """``function`` compiled by numba (``nopython``, no bounds checks) on its first call, cached
    on disk so that later processes load the machine code instead of compiling it (~2 s);
    uncached where numba finds no writable folder for its cache (it raises then).

    Raises ``RuntimeError`` when numba is not installed (check :func:`enabled` first).
    """
    if numba is None:
        raise RuntimeError("numba is not installed: pip install 'vispriv[fast]'")
    try:
        return numba.njit(cache=True, boundscheck=False)(function)
    except RuntimeError:
        return numba.njit(boundscheck=False)(function)
