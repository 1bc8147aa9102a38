"""``python -m vispriv``: the same command line as the ``vispriv`` script."""

from vispriv.harness.cli import main

if __name__ == "__main__":
    main(prog_name="vispriv")
