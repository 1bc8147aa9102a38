"""Run the example Flower app (examples/flower) in Flower's simulation engine, captured.

``flwr.simulation.run_simulation`` runs the ServerApp and one ClientApp per simulated
SuperNode on Ray actors, offline (Flower docs, "Run simulations":
https://flower.ai/docs/framework/how-to-run-simulations.html).

    python -m vispriv.plugins.federated.flower.simulate '{"capture": "cap", "privacy": "secaggplus"}'

runs it once with those ``AppSettings`` (JSON; the defense ``flower`` calls it so, in a
process of its own, since Ray and Flower keep process-wide state).
"""

from __future__ import annotations

import json
import os
import sys

from vispriv.plugins.federated.flower.extra import require_flwr

#: the privacy settings of the example app; the ``secaggplus`` ones run ``secagg_app.py`` (legacy API)
PRIVACY = ("plaintext", "client-dp-fixed-clipping", "server-dp-fixed-clipping", "server-dp-adaptive-clipping", "local-dp",
           "secaggplus", "secaggplus-client-dp-fixed-clipping")


def run_example_app(settings: object, cpus: int = 2) -> None:
    """Simulate the example app with ``settings`` (an ``AppSettings``), one CPU per client actor; privacy
    ``secaggplus*`` runs the legacy-API app of ``secagg_app.py``, the others the Message-API app."""
    require_flwr()
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    from flwr.simulation import run_simulation

    if settings.privacy.startswith("secaggplus"):
        from vispriv.examples.flower.secagg_app import make_secagg_client_app as make_client_app
        from vispriv.examples.flower.secagg_app import make_secagg_server_app as make_server_app
    else:
        from vispriv.examples.flower.client_app import make_client_app
        from vispriv.examples.flower.server_app import make_server_app

    run_simulation(
        server_app=make_server_app(settings),
        client_app=make_client_app(settings),
        num_supernodes=settings.num_clients,
        backend_config={
            "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {"num_cpus": cpus, "include_dashboard": False},
        },
    )


def main(argv: list[str] | None = None) -> int:
    """Simulate once with the ``AppSettings`` given as one JSON argument."""
    from vispriv.examples.flower.task import AppSettings

    args = sys.argv[1:] if argv is None else argv
    raw = json.loads(args[0])
    if "capture_rounds" in raw:
        raw["capture_rounds"] = tuple(raw["capture_rounds"])
    run_example_app(AppSettings(**raw))
    return 0


if __name__ == "__main__":
    sys.exit(main())
