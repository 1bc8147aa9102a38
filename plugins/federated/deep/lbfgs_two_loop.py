"""torch's L-BFGS with its two-loop recursion compiled (numba, optional) and the rest of its step on numpy: the same iterates, bit for bit.

DLG and iDLG run ``torch.optim.LBFGS`` (history 100, strong-Wolfe line search). Its direction
``-H g`` comes from the two-loop recursion (Nocedal & Wright, *Numerical Optimization*, 2nd
ed., Algorithm 7.4): with a full history, 200 dot products and 200 ``axpy`` updates of vectors
of the candidate's size per iteration, each one a tensor call from Python. On DLG's LeNet (a
32x32 digit and 10 label logits, 1,034 variables) that is ~1.1 ms per iteration against the
~2.3 ms of the objective itself; the rest of torch's step (the strong-Wolfe line search, the
memory update, the stopping tests) is a few dozen more tensor calls per evaluation on 0-d
tensors, ~0.15 ms.

:class:`TwoLoopLBFGS` is ``torch.optim.LBFGS`` with that recursion in one compiled loop
(:func:`_two_loop`) and the rest of its step on numpy: vectors are numpy views of torch
buffers, 0-d float32 tensors ``numpy.float32`` scalars, and the line search is torch's
``_strong_wolfe`` ported line for line
(:func:`~vispriv.plugins.federated.deep.strong_wolfe.strong_wolfe`, whose docstring lists the
scalar arithmetic it keeps). It computes the same floating-point operations on the same
operands, so the iterates are the same bits, not merely close:

* a dot product is the very BLAS routine ``torch.dot`` calls for float32 on the CPU (``sdot_``
  of the library torch is linked with, MKL on x86 wheels), looked up in torch's own shared
  library and called on 64-byte-aligned vectors as torch's allocator gives them (MKL's result
  depends on the alignment, so every vector lives in a torch buffer and the stored pairs sit in
  rows padded to 16 floats);
* ``q.add_(v, alpha=a)`` and ``p.add_(d, alpha=t)`` are torch's vectorised ``q + a * v`` with one
  rounding (a fused multiply-add, AVX-512 or AVX2, the scalar tail included), here LLVM's
  ``llvm.fma.f32``;
* elementwise differences, products and ``max |v|`` are exact in any order; the one reduction
  whose order matters, the first step's ``1 / |g|_1``, is torch's own ``sum``.

Whether that holds is not assumed: the first optimiser of a process runs torch's ``LBFGS`` and
this one side by side on a small float32 problem whose history fills and wraps
(:func:`agrees_with_torch`) and uses this step only if every iterate is bitwise the same;
otherwise, and for anything but dense, contiguous float32 parameters on the CPU, ``step`` is
torch's own. ``VISPRIV_LBFGS_KERNEL=0`` turns it off (the benchmarks' baseline); results do not
change.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from vispriv.harness.compiled import enabled, jit, numba
from vispriv.plugins.federated.deep.strong_wolfe import divide, strong_wolfe

#: The environment switch: ``0`` keeps torch's own two-loop recursion.
SWITCH = "VISPRIV_LBFGS_KERNEL"
#: Floats per 64 bytes: the stored pairs' rows are padded to a multiple of this, so that every
#: vector handed to BLAS is aligned as torch's allocator aligns a tensor.
ALIGN = 16
#: torch's threshold on ``yᵀs`` below which a pair is not stored.
CURVATURE_MIN = 1e-10
#: torch's CPU library, where ``torch.dot`` finds its BLAS, by platform.
_LIBRARIES = ("libtorch_cpu.so", "libtorch_cpu.dylib", "torch_cpu.dll")


def sdot_address() -> int | None:
    """The address of the ``sdot_`` (Fortran BLAS) that torch's CPU library is linked with;
    ``None`` where the library exports none."""
    folder = Path(torch.__file__).parent / "lib"
    for name in _LIBRARIES:
        path = folder / name
        if not path.exists():
            continue
        try:
            return ctypes.cast(ctypes.CDLL(str(path)).sdot_, ctypes.c_void_p).value
        except (OSError, AttributeError):
            return None
    return None


class _Pairs:
    """The last ``size`` pairs ``(s_i, y_i)`` and ``ro_i = 1 / yᵀs`` in a ring of aligned rows."""

    def __init__(self, size: int, n: int) -> None:
        stride = -(-n // ALIGN) * ALIGN
        self.buffer = torch.zeros(size, 2, stride, dtype=torch.float32)  # torch's allocator: 64-byte aligned
        self.pairs = self.buffer.numpy()  # row i: s_i, y_i in their first n floats
        self.ro = np.zeros(size, dtype=np.float32)
        self.size, self.head, self.count = size, 0, 0
        self.order = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return self.count

    def push(self, s: np.ndarray, y: np.ndarray, ro: np.float32) -> None:
        """Store a pair, dropping the oldest beyond ``size`` (torch's ``pop(0)``)."""
        row = (self.head + self.count) % self.size
        if self.count == self.size:
            self.head = (self.head + 1) % self.size
        else:
            self.count += 1
        n = s.size
        self.pairs[row, 0, :n], self.pairs[row, 1, :n] = s, y
        self.ro[row] = ro
        self.order = (self.head + np.arange(self.count)) % self.size


class TwoLoopLBFGS(torch.optim.LBFGS):
    """``torch.optim.LBFGS`` (same arguments) whose two-loop recursion runs compiled and the rest
    of its step on numpy; the same iterates bit for bit (module docstring). ``compiled`` says
    whether it does: numba installed, :data:`SWITCH` not ``0``, dense contiguous float32
    parameters on the CPU, ``sdot_`` found and :func:`agrees_with_torch`; where not,
    :meth:`step` is torch's own.
    """

    def __init__(self, params, *args, compiled: bool | None = None, **kwargs) -> None:
        super().__init__(params, *args, **kwargs)
        #: ``None``: decide (class docstring); ``True`` forces the compiled loop (the self-check's
        #: and the tests' comparison), ``False`` keeps torch's step.
        self.compiled = self._can_compile() and kernel_agrees() if compiled is None else compiled

    def _can_compile(self) -> bool:
        params = self._params
        group = self.param_groups[0]
        return (enabled(SWITCH) and group["history_size"] >= 1 and isinstance(group["lr"], (int, float))
                and all(p.device.type == "cpu" and p.dtype == torch.float32 and p.layout == torch.strided
                        and p.is_contiguous() for p in params))

    def zero_grad(self, set_to_none: bool = True) -> None:
        """The parameters' gradients set to ``None`` (or zeroed), without the profiler record and
        the compiler guard around torch's own (~0.07 ms per call: DLG calls it once per evaluation)."""
        for p in self._params:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor]) -> torch.Tensor:  # type: ignore[override]
        """torch's ``LBFGS.step`` (up to ``max_iter`` iterations) on numpy: the direction from
        :func:`_two_loop`, the line search :func:`~vispriv.plugins.federated.deep.strong_wolfe.strong_wolfe`."""
        if not self.compiled:
            return super().step(closure)
        with np.errstate(all="ignore"):  # torch's scalars overflow to inf and divide by zero silently
            return self._step(torch.enable_grad()(closure))

    def _step(self, closure: Callable[[], torch.Tensor]) -> torch.Tensor:
        """torch's ``LBFGS.step`` line for line: 0-d float32 tensors are ``numpy.float32``, vectors
        are numpy views of 64-byte-aligned torch buffers (module docstring)."""
        group = self.param_groups[0]
        lr = group["lr"]  # a Python number (a tensor lr keeps torch's step: _can_compile)
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn = group["line_search_fn"]
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        vectors = _Vectors(self._params)

        orig_loss = closure()
        loss = float(orig_loss.detach())
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad().numpy()
        opt_cond = np.abs(flat_grad).max() <= tolerance_grad
        if opt_cond:
            return orig_loss

        d, t, pairs = state.get("d"), state.get("t"), state.get("pairs")
        h_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = _aligned(vectors.n)
                np.negative(flat_grad, out=d.numpy())
                pairs = _Pairs(group["history_size"], vectors.n)
                h_diag = 1
            else:
                y, s = vectors.y, vectors.s
                np.subtract(flat_grad, prev_flat_grad.numpy(), out=y)
                np.multiply(d.numpy(), t, out=s)
                ys = vectors.dot(y, s)
                if ys > CURVATURE_MIN:
                    pairs.push(s, y, divide(1.0, ys))
                    h_diag = ys / vectors.dot(y, y)
                _two_loop(_SDOT, flat_grad, pairs.pairs, pairs.ro, pairs.order, np.float32(h_diag), d.numpy(),
                          np.empty(len(pairs), dtype=np.float32), vectors.ints)
            if prev_flat_grad is None:
                prev_flat_grad = _aligned(vectors.n)
            prev_flat_grad.numpy()[:] = flat_grad
            prev_loss = loss
            # torch's first step: min(1, 1/|g|_1) * lr, a float32 scalar when 1/|g|_1 < 1
            t = (min(1.0, divide(1.0, np.float32(torch.from_numpy(flat_grad).abs().sum().item()))) * lr
                 if state["n_iter"] == 1 else lr)
            direction = d.numpy()
            gtd = vectors.dot(flat_grad, direction)
            if gtd > -tolerance_change:
                break
            ls_func_evals = 0
            x_init = vectors.parameters()
            if line_search_fn is not None:
                def evaluate(step: float | np.float32, x_init: np.ndarray = x_init, direction: np.ndarray = direction,
                             ) -> tuple[float, np.ndarray, np.float32]:
                    vectors.move(x_init, direction, step)
                    value = float(closure().detach())
                    g = self._gather_flat_grad().numpy()
                    return value, g, vectors.dot(g, direction)

                loss, flat_grad, t, ls_func_evals = strong_wolfe(
                    evaluate, t, np.abs(direction).max(), loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                vectors.move(x_init, direction, t)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                vectors.move(x_init, direction, t)
                if n_iter != max_iter:
                    loss = float(closure().detach())
                    flat_grad = self._gather_flat_grad().numpy()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if (n_iter == max_iter or current_evals >= max_eval or opt_cond
                    or np.abs(direction * t).max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change):
                break
        state.update(d=d, t=t, pairs=pairs, H_diag=h_diag, prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss


def _aligned(n: int) -> torch.Tensor:
    """A float32 vector from torch's allocator (64-byte aligned, as every vector torch hands its BLAS)."""
    return torch.empty(n, dtype=torch.float32)


class _Vectors:
    """One step's vector operations on the parameters as torch's ``LBFGS`` does them: ``x + t d``
    into the parameters (``_set_param`` then ``_add_grad``) and dot products (``torch.dot``), on
    aligned buffers. The flat gradient is torch's own ``_gather_flat_grad`` (a new aligned tensor
    per evaluation, never written to afterwards)."""

    def __init__(self, params: list[torch.Tensor]) -> None:
        self.views = tuple(p.detach().numpy().reshape(-1) for p in params)  # writable views (contiguous: _can_compile)
        self.n = sum(v.size for v in self.views)
        self.ints = np.array([self.n, 1], dtype=np.int32)  # BLAS's length and stride, by reference
        self.y, self.s, self.x = (_aligned(self.n).numpy() for _ in range(3))


    def dot(self, a: np.ndarray, b: np.ndarray) -> np.float32:
        """``torch.dot(a, b)``: the same ``sdot_``, on vectors as aligned as torch's (a float32
        scalar, as torch's 0-d tensor; numba returns a Python float)."""
        return np.float32(_dot(_SDOT, a, b, self.ints))

    def parameters(self) -> np.ndarray:
        """The parameters flattened into one vector (torch's ``_clone_param``)."""
        np.concatenate(self.views, out=self.x)
        return self.x

    def move(self, x: np.ndarray, d: np.ndarray, t: float | np.float32) -> None:
        """The parameters set to ``x + t d`` with one rounding, as ``p.copy_(x); p.add_(d, alpha=t)``."""
        _move(self.views, x, d, np.float32(t))


def agrees_with_torch(steps: int = 6) -> bool:
    """Whether :class:`TwoLoopLBFGS`, compiled, gives torch's ``LBFGS`` iterates bit for bit on
    a float32 Rosenbrock problem of 37 variables (a vector tail past the 16-float lanes), history
    4 (filled and wrapped), strong-Wolfe line search, ``steps`` calls of 5 iterations."""
    start = torch.rand(37, generator=torch.Generator().manual_seed(0), dtype=torch.float32) * 2 - 1
    iterates = []
    for compiled in (False, True):
        v = start.clone().requires_grad_(True)
        optimiser = TwoLoopLBFGS([v], lr=1, max_iter=5, history_size=4, line_search_fn="strong_wolfe", compiled=compiled)

        def closure(v=v, optimiser=optimiser) -> torch.Tensor:
            optimiser.zero_grad()
            loss = (100 * (v[1:] - v[:-1] ** 2) ** 2 + (1 - v[:-1]) ** 2).sum()
            loss.backward()
            return loss

        trace = []
        for _ in range(steps):
            optimiser.step(closure)
            trace.append(v.detach().clone())
        iterates.append(torch.stack(trace))
    return torch.equal(iterates[0], iterates[1])


@functools.cache
def kernel_agrees() -> bool:
    """:func:`agrees_with_torch`, once per process; ``False`` where the loop cannot run at all
    (numba missing, no ``sdot_``)."""
    if numba is None or _SDOT is None:
        return False
    return agrees_with_torch()


_SDOT = sdot_address()

if numba is not None:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def _sdot(typingctx, address, n, x, inc, y):
        """``sdot_(&n, x, &inc, y, &inc)`` at ``address``: every argument an address (intp)."""
        signature = types.float32(types.intp, types.intp, types.intp, types.intp, types.intp)

        def codegen(context, builder, sig, args):
            pointer = ir.IntType(8).as_pointer()
            function_type = ir.FunctionType(ir.FloatType(), [pointer] * 5)
            function = builder.inttoptr(args[0], function_type.as_pointer())
            n, x, inc, y = (builder.inttoptr(a, pointer) for a in args[1:])
            return builder.call(function, [n, x, inc, y, inc])

        return signature, codegen

    @intrinsic
    def _fma(typingctx, a, b, c):
        """``a * b + c`` in float32 with one rounding (``llvm.fma.f32``)."""
        signature = types.float32(types.float32, types.float32, types.float32)

        def codegen(context, builder, sig, args):
            f32 = ir.FloatType()
            function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32, f32, f32]), "llvm.fma.f32")
            return builder.call(function, args)

        return signature, codegen

    def _dot_source(address, a, b, ints):
        """``sdot_`` of ``a`` and ``b`` (length and stride by reference in ``ints``)."""
        return np.float32(_sdot(address, ints.ctypes.data, a.ctypes.data, ints[1:].ctypes.data, b.ctypes.data))

    _dot = jit(_dot_source)

    def _two_loop_source(address, g, pairs, ro, order, h_diag, d, al, ints):
        """``d = -H g`` by torch's two-loop recursion over the pairs in ``order`` (oldest first):
        ``q = -g``; newest to oldest ``a_i = (s_i . q) ro_i``, ``q += -a_i y_i``; ``r = q h``;
        oldest to newest ``b_i = (y_i . r) ro_i``, ``r += (a_i - b_i) s_i``. ``ints`` holds
        ``(n, 1)``, BLAS's length and stride by reference."""
        n = g.size
        for j in range(n):
            d[j] = -g[j]
        for k in range(order.size - 1, -1, -1):
            i = order[k]
            a = _dot(address, pairs[i, 0], d, ints) * ro[i]
            al[k] = a
            minus_a = -a
            y = pairs[i, 1]
            for j in range(n):
                d[j] = _fma(y[j], minus_a, d[j])
        for j in range(n):
            d[j] = d[j] * h_diag
        for k in range(order.size):
            i = order[k]
            b = _dot(address, pairs[i, 1], d, ints) * ro[i]
            c = al[k] - b
            s = pairs[i, 0]
            for j in range(n):
                d[j] = _fma(s[j], c, d[j])

    def _move_source(views, x, d, t):
        """Each parameter's flat view set to its slice of ``x + t d``, one rounding (``llvm.fma.f32``)."""
        offset = 0
        for view in views:
            for j in range(view.size):
                view[j] = _fma(d[offset + j], t, x[offset + j])
            offset += view.size

    _two_loop = jit(_two_loop_source)
    _move = jit(_move_source)
