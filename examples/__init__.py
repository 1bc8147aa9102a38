"""The example matrix configs (YAML beside this file), shipped as ``vispriv.examples``: ``vispriv examples``."""
