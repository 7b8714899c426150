"""The SQL of every pqrun call the client makes, written once.

Each function here builds a ``Call``: the statement, its parameters, how
its rows become the Python result, and which SQLSTATEs become which
``PqrunError``. ``execute`` runs a call on a psycopg ``Connection``,
``execute_async`` on an ``AsyncConnection``; the producer functions, the
thread worker and the asyncio worker all go through them, so the protocol
lives in this file alone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, Sequence, Type, TypeVar, Union

import psycopg
from psycopg import sql
from psycopg.rows import dict_row

from .errors import ERRORS, RETRY_ERRORS, PqrunError, translate
from .jobs import Job, JobSpec, jsonb

T = TypeVar("T")
Row = Dict[str, Any]
Query = Union[str, sql.SQL, sql.Composed]


@dataclasses.dataclass(frozen=True)
class Call(Generic[T]):
    query: Query
    params: Union[Sequence[Any], Mapping[str, Any]]
    parse: Callable[[List[Row]], T]
    errors: Mapping[str, Type[PqrunError]] = dataclasses.field(default_factory=lambda: ERRORS)


def execute(conn: psycopg.Connection[Any], call: Call[T]) -> T:
    """Runs ``call`` on ``conn`` (in its transaction, if one is open)."""
    try:
        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(call.query, call.params)
            rows = cur.fetchall() if cur.description is not None else []
    except psycopg.Error as exc:
        mapped = translate(exc, call.errors)
        if mapped is None:
            raise
        raise mapped from exc
    return call.parse(rows)


async def execute_async(conn: psycopg.AsyncConnection[Any], call: Call[T]) -> T:
    """``execute`` on an asyncio connection."""
    try:
        async with conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(call.query, call.params)
            rows = await cur.fetchall() if cur.description is not None else []
    except psycopg.Error as exc:
        mapped = translate(exc, call.errors)
        if mapped is None:
            raise
        raise mapped from exc
    return call.parse(rows)


def _interval(seconds: Optional[float]) -> Optional[dt.timedelta]:
    return None if seconds is None else dt.timedelta(seconds=seconds)


def _array(values: Optional[Sequence[str]]) -> Optional[List[str]]:
    return list(values) if values else None


def _jobs(rows: List[Row]) -> List[Job]:
    return [Job.from_row(r) for r in rows]


def _first(rows: List[Row]) -> Any:
    return next(iter(rows[0].values()))


def _nothing(rows: List[Row]) -> None:
    return None


# -- producing ----------------------------------------------------------------------

_CASTS = {"depends_on": "::bigint[]", "run_after": "::timestamptz"}


def enqueue(spec: JobSpec) -> Call[int]:
    """``pqrun.enqueue``: the new job's id, or, for a dedupe_key an
    unfinished job holds, that job's id."""
    args: List[sql.Composable] = [sql.SQL("{}, {}").format(sql.Placeholder("job_type"), sql.Placeholder("payload"))]
    params: Dict[str, Any] = {"job_type": spec.job_type, "payload": jsonb({} if spec.payload is None else spec.payload)}
    for name, value in spec.options().items():
        if name == "run_after" and isinstance(value, dt.timedelta):
            # A delay counts from the statement, by the server's clock.
            template = "{} => pg_catalog.statement_timestamp() + {}::interval"
        else:
            template = "{} => {}" + _CASTS.get(name, "")
        args.append(sql.SQL(template).format(sql.Identifier(name), sql.Placeholder(name)))
        params[name] = list(value) if name == "depends_on" else value
    query = sql.SQL("SELECT pqrun.enqueue({})").format(sql.SQL(", ").join(args))
    return Call(query, params, _first)


def enqueue_batch(specs: Sequence[JobSpec]) -> Call[List[int]]:
    """``pqrun.enqueue_batch``: one id per job, in order. Delays (a
    timedelta ``run_after``) become moments in the server, as enqueue's."""
    elements: List[Dict[str, Any]] = []
    delays: List[Optional[dt.timedelta]] = []
    for spec in specs:
        element: Dict[str, Any] = {"job_type": spec.job_type, "payload": {} if spec.payload is None else spec.payload}
        delay = None
        for name, value in spec.options().items():
            if name == "run_after" and isinstance(value, dt.timedelta):
                delay = value
            else:
                element[name] = list(value) if name == "depends_on" else value
        elements.append(element)
        delays.append(delay)
    if not any(d is not None for d in delays):
        return Call("SELECT id FROM pqrun.enqueue_batch(%s) WITH ORDINALITY AS b(id, n) ORDER BY n",
                    [jsonb(elements)], lambda rows: [r["id"] for r in rows])
    query = """
        SELECT id FROM pqrun.enqueue_batch((
            SELECT pg_catalog.jsonb_agg(CASE WHEN d.delay IS NULL THEN j.job
                       ELSE j.job || pg_catalog.jsonb_build_object('run_after',
                                         pg_catalog.statement_timestamp() + d.delay) END ORDER BY j.n)
              FROM pg_catalog.jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS j(job, n)
              JOIN pg_catalog.unnest(%s::interval[]) WITH ORDINALITY AS d(delay, n) USING (n)
        )) WITH ORDINALITY AS b(id, n) ORDER BY n"""
    return Call(query, [jsonb(elements), delays], lambda rows: [r["id"] for r in rows])


def cancel(job_id: int, reason: Optional[str] = None, queue: Optional[str] = None) -> Call[bool]:
    """``pqrun.cancel``: False when the job had already finished."""
    return Call("SELECT pqrun.cancel(%s, %s, queue => %s)", [job_id, reason, queue], _first)


def retry(job_id: int, queue: Optional[str] = None) -> Call[bool]:
    """``pqrun.retry``: False unless the job was FAILED or CANCELLED."""
    return Call("SELECT pqrun.retry(%s, queue => %s)", [job_id, queue], _first, RETRY_ERRORS)


def get_job(job_id: int) -> Call[Optional[Job]]:
    return Call("SELECT * FROM pqrun.jobs WHERE id = %s", [job_id], lambda rows: Job.from_row(rows[0]) if rows else None)


# -- consuming ------------------------------------------------------------------------


def hold_by_session() -> Call[None]:
    """The session holds the jobs it claims (orphan rescue when it ends)."""
    return Call("SET pqrun.claim_hold = session", [], _nothing)


def check_client_every_second() -> Call[None]:
    """A backend waiting in a pickup notices within a second that its
    client died, instead of at the end of the wait."""
    return Call("SET client_connection_check_interval = '1s'", [], _nothing)


def pickup(worker_id: str, job_types: Optional[Sequence[str]] = None, queues: Optional[Sequence[str]] = None,
           batch_size: int = 1, wait: float = 0.0) -> Call[List[Job]]:
    """``pqrun.pickup``: claims up to batch_size jobs; with wait > 0
    (seconds) it sleeps in the server until a matching job is committed or
    the wait ends."""
    return Call("SELECT * FROM pqrun.pickup(%s, job_types => %s::text[], queues => %s::text[],"
                " batch_size => %s, wait => %s)",
                [worker_id, _array(job_types), _array(queues), batch_size, _interval(wait)], _jobs)


def mark_done(job: Job, result: Any = None) -> Call[None]:
    return Call("SELECT pqrun.mark_done(%s, %s, lease_token => %s, queue => %s)",
                [job.id, None if result is None else jsonb(result), job.lease_token, job.queue], _nothing)


def mark_done_and_pickup(job: Job, result: Any, worker_id: str, job_types: Optional[Sequence[str]] = None,
                         queues: Optional[Sequence[str]] = None, batch_size: int = 1) -> Call[List[Job]]:
    """``pqrun.mark_done_and_pickup``: mark_done and a pickup that never
    waits, in one statement. The jobs it returns are claimed once the
    transaction commits; none means: back to a waiting pickup."""
    return Call("SELECT * FROM pqrun.mark_done_and_pickup(%s, ARRAY[%s]::bigint[], ARRAY[%s]::uuid[],"
                " ARRAY[%s]::jsonb[], job_types => %s::text[], queues => %s::text[], batch_size => %s)",
                [worker_id, job.id, job.lease_token, None if result is None else jsonb(result), _array(job_types),
                 _array(queues), batch_size], _jobs)


def mark_error(job: Job, error: str, terminal: bool = False, retry_after: Optional[float] = None) -> Call[str]:
    """``pqrun.mark_error``: the job's new status, 'READY' (to be retried) or 'FAILED'."""
    return Call("SELECT pqrun.mark_error(%s, %s, terminal => %s, lease_token => %s, retry_after => %s,"
                " queue => %s)::text",
                [job.id, error, terminal, job.lease_token, _interval(retry_after), job.queue], _first)


def heartbeat(job: Job, progress: Any = None, wait: float = 0.0) -> Call[None]:
    """``pqrun.heartbeat``: renews the lease and stores ``progress`` unless
    None. With wait > 0 (seconds) it first sleeps in the server until the job
    is no longer this lease's (55000: at once when it is cancelled) or the
    wait ends, so it needs a connection of its own."""
    return Call("SELECT pqrun.heartbeat(%s, lease_token => %s, progress => %s, wait => %s, queue => %s)",
                [job.id, job.lease_token, None if progress is None else jsonb(progress), _interval(wait), job.queue],
                _nothing)


def release(job: Job) -> Call[None]:
    """``pqrun.release``: READY again at once, the attempt not used up."""
    return Call("SELECT pqrun.release(%s, lease_token => %s, queue => %s)", [job.id, job.lease_token, job.queue],
                _nothing)


def snooze(job: Job, seconds: float) -> Call[None]:
    """``pqrun.snooze``: READY again after ``seconds``, the attempt not used up."""
    return Call("SELECT pqrun.snooze(%s, %s, lease_token => %s, queue => %s)",
                [job.id, _interval(seconds), job.lease_token, job.queue], _nothing)
