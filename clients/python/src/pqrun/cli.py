"""pqrun-worker (or python3 -m pqrun): run the handlers of a module.

    pqrun-worker --dsn "dbname=app" --module myhandlers --concurrency 4

``--module`` names a module with a ``registry`` (a Registry) or a
``HANDLERS`` dict, or ``module:attribute``; a script that has its registry
at hand calls ``main(registry=registry)`` instead. ``--concurrency`` slots
run jobs, and one poller claims jobs for the free ones, up to all of them in
one pickup that long-polls ``--poll-wait`` seconds. ``--asyncio`` runs an
AsyncWorker (async def handlers only). Stops gracefully on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from typing import Any, Dict, List, Mapping, Optional

from .async_worker import AsyncWorker
from .worker import Worker


def load_handlers(spec: str) -> Mapping[str, Any]:
    module_name, _, attr = spec.partition(":")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    for name in [attr] if attr else ["registry", "HANDLERS"]:
        handlers = getattr(module, name, None)
        if isinstance(handlers, Mapping):
            return handlers
    raise SystemExit(f"{module_name} has no handler mapping {attr or '(registry or HANDLERS)'}")


def _csv(value: str) -> List[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def parser(prog: str = "pqrun-worker", module_required: bool = True) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Run pqrun job handlers.")
    p.add_argument("--dsn", default=os.environ.get("PQRUN_DSN", ""),
                   help="libpq connection string (default $PQRUN_DSN; PGHOST, PGDATABASE... apply)")
    p.add_argument("--module", required=module_required, help="module with the handlers: name or name:attribute")
    p.add_argument("--concurrency", type=int, default=int(os.environ.get("WORKER_CONCURRENCY", "1")),
                   help="slots: jobs run at once, one connection each, and one more for the poller that claims"
                        " jobs for the free slots (default $WORKER_CONCURRENCY or 1)")
    p.add_argument("--job-types", type=_csv, default=None, help="comma-separated (default: every registered type)")
    p.add_argument("--queues", type=_csv, default=None, help="comma-separated (default: all queues)")
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
    p.add_argument("--asyncio", action="store_true", help="run an AsyncWorker (async def handlers only)")
    p.add_argument("--log-level", default="INFO")
    return p


async def _run_async(worker: AsyncWorker) -> int:
    """``worker.run()`` (asyncio.run wants a coroutine, not an awaitable)."""
    return await worker.run()


def main(argv: Optional[List[str]] = None, registry: Optional[Mapping[str, Any]] = None,
         prog: str = "pqrun-worker") -> int:
    p = parser(prog, module_required=registry is None)
    args = p.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s")
    handlers = load_handlers(args.module) if args.module else registry
    assert handlers is not None
    options: Dict[str, Any] = dict(concurrency=args.concurrency, job_types=args.job_types, queues=args.queues,
                   worker_id=args.worker_id, poll_wait=args.poll_wait, heartbeat_interval=args.heartbeat_interval,
                   grace_period=args.grace_period, hold=args.hold)
    try:
        if args.asyncio:
            async_worker = AsyncWorker(handlers, args.dsn, **options)
        else:
            worker = Worker(handlers, args.dsn, **options)
    except ValueError as exc:
        p.error(str(exc))
    if args.asyncio:
        return asyncio.run(_run_async(async_worker))
    code = worker.run()
    if worker.stragglers:
        # Handlers still running after their jobs were released: don't wait for them.
        logging.shutdown()
        os._exit(code)
    return code
