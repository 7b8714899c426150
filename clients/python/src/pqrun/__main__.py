"""python3 -m pqrun: the worker CLI (see pqrun.cli)."""

import sys

from .cli import main

sys.exit(main(prog="python3 -m pqrun"))
