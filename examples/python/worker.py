"""Runs the example handlers with the pqrun client's worker.

    PYTHONPATH=../../clients/python/src python3 worker.py --dsn "dbname=app" --concurrency 4

Takes the options of ``pqrun-worker`` (``--help``) but ``--module``: the
handlers are those of handlers.py.
"""

import sys

from pqrun.cli import main

from handlers import registry

if __name__ == "__main__":
    sys.exit(main(registry=registry, prog="worker.py"))
