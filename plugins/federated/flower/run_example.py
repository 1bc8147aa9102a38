"""One command: simulate the example Flower app captured, then attack the capture.

    python -m vispriv.plugins.federated.flower.run_example --capture flower-capture

runs ``examples/flower`` (2 clients, 1 round, batch 1, one local step: FedSGD) under Flower's
simulation engine with :class:`~vispriv.plugins.federated.flower.capture.CaptureStrategy`, then
``vispriv matrix`` on the shipped ``flower/attack`` config with the capture's folder set.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

from vispriv.harness.errors import VisprivError
from vispriv.plugins.federated.flower.extra import require_flwr
from vispriv.plugins.federated.flower.simulate import PRIVACY


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m vispriv.plugins.federated.flower.run_example", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--capture", default="flower-capture", help="capture folder to write (refused if not empty)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing capture folder")
    p.add_argument("--clients", type=int, default=2)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--local-epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--privacy", default="plaintext",
                   choices=list(PRIVACY))
    p.add_argument("--noise-multiplier", type=float, default=0.0)
    p.add_argument("--clipping-norm", type=float, default=1.0)
    p.add_argument("--epsilon", type=float, default=1.0, help="local-dp: LocalDpMod's epsilon (per round)")
    p.add_argument("--delta", type=float, default=1e-5, help="local-dp: LocalDpMod's delta (per round)")
    p.add_argument("--no-attack", action="store_true", help="only simulate and capture")
    p.add_argument("--tracking-uri", default="", help="passed to vispriv matrix")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        require_flwr()
    except VisprivError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from vispriv.examples.flower.task import AppSettings
    from vispriv.plugins.federated.flower.simulate import run_example_app

    capture = Path(args.capture).resolve()
    if capture.exists() and any(capture.iterdir()):
        if not args.overwrite:
            print(f"error: capture folder {capture} is not empty; pass --overwrite to replace it", file=sys.stderr)
            return 2
        shutil.rmtree(capture)
    settings = AppSettings(num_clients=args.clients, rounds=args.rounds, batch_size=args.batch_size,
                           local_epochs=args.local_epochs, lr=args.lr, images_per_client=max(4, args.batch_size),
                           capture=str(capture), capture_rounds=(1,), privacy=args.privacy,
                           noise_multiplier=args.noise_multiplier, clipping_norm=args.clipping_norm,
                           epsilon=args.epsilon, delta=args.delta, out=str(capture / "final"))
    run_example_app(settings)
    print(f"capture written to {capture}")
    if args.no_attack:
        return 0
    config = files("vispriv.examples.flower") / "attack.yaml"
    cmd = [sys.executable, "-m", "vispriv", "matrix", str(config), "--set", f"datasets.0.capture={capture}"]
    if args.tracking_uri:
        cmd += ["--tracking-uri", args.tracking_uri]
    print("running:", " ".join(cmd))
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
