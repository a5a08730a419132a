"""``python -m toolkit.cli ARGS`` runs the ``twostage`` command (a checkout without the console script)."""

from toolkit.cli import main

main(prog_name="twostage")
