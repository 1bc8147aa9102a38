"""Where two trainings of the same inversion network part: per-step hashes of every tensor, and a diff.

``run TRACE -- VISPRIV ARGS...`` runs ``vispriv`` with :class:`InversionModule` instrumented:
each training step appends one JSON line to TRACE with the sha256 prefix of the batch
(features, pixel index, target), of every leaf module's output and of the loss, and after
the backward pass one line with the gradient reaching the feature projection's output, every
convolution's input gradient and the gradient of every parameter. ``compare A B`` prints the
first record where two traces differ and which tensors differ there. With the same cached
SIFT and seeds, two runs that differ must differ in some op's arithmetic: the first
differing tensor names it (docs/paper-scale.md, "Same numbers on another machine").

    .venv/bin/python benchmarks/probes/training_trace.py run /tmp/r1.jsonl -- matrix benchmarks/probes/training_probe.yaml \\
        --quiet --tracking-uri sqlite:////tmp/r1/m.db --cache-dir /tmp/r1/c
    .venv/bin/python benchmarks/probes/training_trace.py compare /tmp/r1.jsonl /tmp/r2.jsonl
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def digest(t: Any) -> str:
    return hashlib.sha256(t.detach().contiguous().float().numpy().tobytes()).hexdigest()[:12]


def instrument(path: str) -> None:
    """Patch InversionModule so every step and every backward pass writes its hashes to ``path``."""
    import torch

    from vispriv.plugins.descriptor_release.inversion import module

    out = open(path, "w")  # noqa: SIM115 -- open for the life of the process
    upstream: dict[str, str] = {}
    step = module.InversionModule.training_step

    def training_step(self, batch, batch_idx):
        rec: dict[str, Any] = {"step": batch_idx, "batch": {k: digest(batch[k]) for k in ("features", "index", "target")}}
        acts: dict[str, str] = {}
        hooks = [m.register_forward_hook(lambda _m, _i, o, n=name: acts.__setitem__(n, digest(o)))
                 for name, m in self.net.named_modules() if name and not list(m.children())]
        if self.net.project is not None:  # the gradient reaching the projection's output (the first layer's input gradient, gathered)
            def watch(_m, _i, o):
                o.register_hook(lambda g: upstream.__setitem__("project", digest(g)))

            hooks.append(self.net.project.register_forward_hook(watch))
        for name, m in self.net.named_modules():  # the input gradient of every convolution
            if isinstance(m, torch.nn.Conv2d):
                hooks.append(m.register_full_backward_hook(
                    lambda _m, gin, _gout, n=name: upstream.__setitem__(f"{n}.input", digest(gin[0])) if gin[0] is not None else None))
        loss = step(self, batch, batch_idx)
        for hook in hooks:
            hook.remove()
        rec.update(outputs=acts, loss=digest(loss))
        out.write(json.dumps(rec) + "\n")
        out.flush()
        return loss

    def on_after_backward(self):
        grads = {n: digest(p.grad) for n, p in self.named_parameters() if p.grad is not None}
        out.write(json.dumps({"output_gradients": dict(upstream), "gradients": grads}) + "\n")
        out.flush()

    module.InversionModule.training_step = training_step
    module.InversionModule.on_after_backward = on_after_backward


def _flat(rec: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    for key, value in rec.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}/")
        else:
            yield f"{prefix}{key}", value


def compare(a: str, b: str) -> None:
    ra = [json.loads(line) for line in Path(a).read_text().splitlines()]
    rb = [json.loads(line) for line in Path(b).read_text().splitlines()]
    step = -1
    for i, (x, y) in enumerate(zip(ra, rb)):
        step = x.get("step", step)
        fx, fy = dict(_flat(x)), dict(_flat(y))
        differ = [k for k in fx if fx[k] != fy.get(k)]
        if differ:
            where = "after the backward pass of step" if "gradients" in x else "in step"
            print(f"first difference: record {i}, {where} {step}: {len(differ)} tensors, first {differ[:6]}")
            return
    print(f"identical over {min(len(ra), len(rb))} records ({len(ra)} and {len(rb)} written)")


def main() -> None:
    if len(sys.argv) >= 4 and sys.argv[1] == "run" and sys.argv[3] == "--":
        instrument(sys.argv[2])
        from vispriv.harness.cli import main as cli

        sys.argv = ["vispriv", *sys.argv[4:]]
        cli()
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
