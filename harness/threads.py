"""A fixed torch thread count for a block of work: the same numbers on a 2-core laptop and a 64-core server.

PyTorch's CPU kernels split their reductions (a convolution's weight gradient summed over the
batch, a matrix product's inner sums) into one partial sum per thread, so a network trained
with 2 threads differs in its last bits from one trained with 16, and after a few thousand
optimiser steps the two networks give visibly different reconstructions. By default torch uses
one thread per core, which ties a result to the machine it ran on. Plugins that train or
optimise wrap that work in :func:`torch_threads` with a count from their config, so the count
is a setting of the experiment rather than a property of the machine. The instruction set
(AVX2, AVX-512) still picks the kernels: fixing threads makes runs agree across core counts
and loads, not across every CPU. :func:`blas_threads` does the same for numpy's BLAS.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run torch's CPU kernels on ``threads`` intra-op threads inside the block (``None``: leave as is).

    The previous count is restored on exit, also when the block raises.
    """
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"threads must be >= 1 or None; got {threads}")
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def blas_threads(threads: int | None) -> Iterator[None]:
    """Limit the BLAS libraries numpy (and faiss) loaded to ``threads`` threads inside the block (``None``: as is).

    A multi-threaded OpenBLAS ``gemm`` blocks its inner sums differently from a one-threaded one,
    so ``x @ y.T`` can differ in the last bit with the machine's core count; where a result
    compares such products (nearest neighbours among repeated dictionary words, whose distances
    tie up to rounding), that bit decides which neighbour wins.
    """
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads, user_api="blas"):
        yield
