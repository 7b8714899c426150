"""The job row (``Job``), a job to enqueue (``JobSpec``) and how Python
values become pqrun's JSON."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import json
import uuid
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from psycopg.types.json import Jsonb

Delay = Union[dt.datetime, dt.timedelta]


@dataclasses.dataclass(frozen=True)
class Job:
    """A row of ``pqrun.jobs``, as ``pickup`` returns it."""

    id: int
    job_type: str
    payload: Any
    status: str
    priority: int
    attempts: int
    max_attempts: int
    run_after: dt.datetime
    timeout_seconds: Optional[int]
    locked_at: Optional[dt.datetime]
    locked_by: Optional[str]
    dedupe_key: Optional[str]
    last_error: Optional[str]
    finished_at: Optional[dt.datetime]
    duration_ms: Optional[int]
    result: Any
    created_at: dt.datetime
    updated_at: dt.datetime
    queue: str = "default"
    lease_token: Optional[uuid.UUID] = None
    fifo_key: Optional[str] = None
    depends_on: Optional[List[int]] = None
    progress: Any = None
    snoozes: int = 0
    concurrency_key: Optional[str] = None
    rate_weight: Optional[int] = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "Job":
        return cls(**{f.name: row.get(f.name, f.default) for f in dataclasses.fields(cls)})


# enqueue's arguments after job_type and payload, in pqrun's order.
OPTIONS = ("priority", "run_after", "max_attempts", "timeout_seconds", "dedupe_key", "queue", "depends_on",
           "fifo_key", "concurrency_key", "rate_weight")


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """A job to enqueue: ``pqrun.enqueue``'s arguments. Options left None
    take pqrun's defaults (priority 0, now, 5 attempts, queue 'default'...).
    ``run_after`` is a moment (a datetime; a naive one is read in the
    session's TimeZone) or a delay from the statement's start (a timedelta,
    measured by the server's clock)."""

    job_type: str
    payload: Any = None
    priority: Optional[int] = None
    run_after: Optional[Delay] = None
    max_attempts: Optional[int] = None
    timeout_seconds: Optional[int] = None
    dedupe_key: Optional[str] = None
    queue: Optional[str] = None
    depends_on: Optional[Sequence[int]] = None
    fifo_key: Optional[str] = None
    concurrency_key: Optional[str] = None
    rate_weight: Optional[int] = None

    @classmethod
    def of(cls, value: Union["JobSpec", Mapping[str, Any]]) -> "JobSpec":
        """A JobSpec, or a mapping keyed by enqueue's argument names."""
        if isinstance(value, JobSpec):
            return value
        unknown = set(value) - {"job_type", "payload", *OPTIONS}
        if unknown:
            raise TypeError(f"unknown enqueue option(s): {', '.join(sorted(unknown))}")
        return cls(**value)

    def options(self) -> Dict[str, Any]:
        """The options that are set, by name."""
        return {name: getattr(self, name) for name in OPTIONS if getattr(self, name) is not None}


def to_json(value: Any) -> Any:
    """``json.dumps``'s ``default``: dataclasses (an args object), dates and
    times (ISO 8601), UUIDs, enums, decimals (as strings), sets, and objects
    with pydantic's ``model_dump``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return list(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def dumps(value: Any) -> str:
    return json.dumps(value, default=to_json, separators=(",", ":"))


def jsonb(value: Any) -> Jsonb:
    """``value`` as a jsonb parameter."""
    return Jsonb(value, dumps=dumps)
