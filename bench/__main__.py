"""``python -m bench`` runs the command line."""

from bench.cli import main

main(prog_name="bench")
