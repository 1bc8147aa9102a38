"""A fast CLI: listing plugins, help and a dry run import neither torch, lightning, mlflow nor scikit-learn.

Every built-in plugin module is imported by these commands (registration), so this also
checks that plugin modules import their heavy libraries where they use them, at run time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("torch", "lightning", "mlflow", "sklearn")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

_PROBE = """
import json, sys
from vispriv.harness.cli import main
heavy = json.loads(sys.argv[2])
sys.argv = ["vispriv", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
loaded = sorted(m for m in heavy if m in sys.modules)
print("PROBE", json.dumps({"code": code, "loaded": loaded}))
"""


def _heavy_modules_loaded(args: list[str], cwd: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("VISPRIV_PLUGINS", "PYTHONPATH")}
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(args), json.dumps(HEAVY)],
                         cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    line = next((x for x in out.stdout.splitlines() if x.startswith("PROBE ")), None)
    assert line is not None, out.stdout[-2000:] + out.stderr[-2000:]
    assert "warning" not in out.stderr, out.stderr  # every built-in plugin module imported cleanly
    return json.loads(line.removeprefix("PROBE "))


@pytest.mark.parametrize("args", [
    ["--help"],
    ["plugins"],
    ["plugins", "ldp-feat", "--json"],
    ["matrix", str(EXAMPLES / "descriptor_release.yaml"), "--dry-run"],
    ["matrix", str(EXAMPLES / "album.yaml"), "--dry-run"],
    ["matrix", str(EXAMPLES / "federated.yaml"), "--dry-run"],
], ids=["help", "plugins", "plugins-name", "dry-run-descriptor", "dry-run-album", "dry-run-federated"])
def test_light_commands_import_no_heavy_library(args, tmp_path):
    probe = _heavy_modules_loaded(args, tmp_path)
    assert probe["code"] in (0, None)
    assert probe["loaded"] == []
