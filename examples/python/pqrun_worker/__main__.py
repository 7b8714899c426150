"""python3 -m pqrun_worker --dsn DSN --module myhandlers --concurrency 4 --job-types a,b --queues default

Runs a Worker with the handlers of a module: its ``registry`` (a Registry) or
``HANDLERS`` (a dict job_type -> function), or the attribute named as in
``--module myhandlers:my_registry``. ``--concurrency`` slots run jobs, and
one poller claims jobs for the free ones, up to all of them in one pickup
that long-polls ``--poll-wait`` seconds. Stops gracefully on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Mapping

from .store import PgJobStore
from .worker import Worker


def load_handlers(spec: str) -> Mapping:
    module_name, _, attr = spec.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    for name in [attr] if attr else ["registry", "HANDLERS"]:
        handlers = getattr(module, name, None)
        if isinstance(handlers, Mapping):
            return handlers
    raise SystemExit(f"{module_name} has no handler mapping {attr or '(registry or HANDLERS)'}")


def csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m pqrun_worker", description="Run pqrun job handlers.")
    p.add_argument("--dsn", default=os.environ.get("PQRUN_DSN", ""),
                   help="libpq connection string (default $PQRUN_DSN; PGHOST, PGDATABASE... apply)")
    p.add_argument("--module", required=True, help="module with the handlers: name or name:attribute")
    p.add_argument("--concurrency", type=int, default=int(os.environ.get("WORKER_CONCURRENCY", "1")),
                   help="slots: jobs run at once, one connection each, and one more for the poller that claims"
                        " jobs for the free slots (default $WORKER_CONCURRENCY or 1)")
    p.add_argument("--job-types", type=csv, default=None, help="comma-separated (default: every registered type)")
    p.add_argument("--queues", type=csv, default=None, help="comma-separated (default: all queues)")
    p.add_argument("--worker-id", default=None, help="default: hostname-pid")
    p.add_argument("--poll-wait", type=float, default=5.0,
                   help="seconds one pickup of the poller long-polls (default 5)")
    p.add_argument("--heartbeat-interval", type=float, default=30.0,
                   help="seconds one heartbeat of a running job waits in the server before it renews the lease"
                        " (default 30)")
    p.add_argument("--grace-period", type=float, default=30.0,
                   help="seconds in-flight jobs get to finish at shutdown before pqrun.release (default 30)")
    p.add_argument("--hold", choices=("session", "lease"), default="session",
                   help="session: a job of a worker that dies is given back within a round (default);"
                        " lease: only after its stale window (behind a pooler in transaction mode)")
    p.add_argument("--log-level", default="INFO")
    args = p.parse_args(argv)

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s")
    try:
        worker = Worker(PgJobStore(args.dsn), load_handlers(args.module), concurrency=args.concurrency,
                        job_types=args.job_types, queues=args.queues, worker_id=args.worker_id,
                        poll_wait=args.poll_wait, heartbeat_interval=args.heartbeat_interval,
                        grace_period=args.grace_period, hold=args.hold)
    except ValueError as exc:
        p.error(str(exc))
    code = worker.run()
    if worker.stragglers:
        # Handlers still running after their jobs were released: don't wait for them.
        logging.shutdown()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
