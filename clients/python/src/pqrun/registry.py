"""The handler registry: job type -> handler, and the args type its
payload is checked against before the handler runs."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Dict, Iterator, Mapping, Optional, TypeVar, Union

from .errors import InvalidArgs
from .validation import ArgsError, Convert, converter

Handler = Callable[..., Any]
F = TypeVar("F", bound=Handler)


@dataclasses.dataclass(frozen=True)
class HandlerSpec:
    job_type: str
    fn: Handler
    args_type: Any = None
    convert: Optional[Convert] = None

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    def args(self, payload: Any) -> Any:
        """The payload as the handler's args type (the payload itself without
        one); ``InvalidArgs``, a terminal error, when it does not fit."""
        if self.convert is None:
            return payload
        try:
            return self.convert(payload)
        except ArgsError as exc:
            name = getattr(self.args_type, "__name__", None) or repr(self.args_type)
            raise InvalidArgs(f"invalid args for job type {self.job_type!r} ({name}): {exc}") from None


class Registry(Mapping[str, Handler]):
    """job_type -> handler. A handler takes a ``JobContext`` (an
    ``AsyncJobContext`` in the asyncio worker) and returns a JSON value,
    stored in ``jobs.result``::

        registry = Registry()

        @registry.handler("send_email", args=SendEmail)   # a dataclass or TypedDict
        def send_email(ctx: JobContext[SendEmail]) -> dict:
            return {"sent_to": ctx.args.to}

    With ``args``, the payload is checked and converted before the handler
    runs (``ctx.args``); a payload that does not fit fails the job at once
    (``InvalidArgs``, no retries)."""

    def __init__(self, handlers: Optional[Mapping[str, Handler]] = None) -> None:
        self._specs: Dict[str, HandlerSpec] = {}
        for job_type, fn in (handlers or {}).items():
            self.add(job_type, fn)

    @classmethod
    def of(cls, handlers: Union["Registry", Mapping[str, Handler]]) -> "Registry":
        return handlers if isinstance(handlers, Registry) else cls(handlers)

    def add(self, job_type: str, fn: Handler, *, args: Any = None) -> None:
        if not job_type:
            raise ValueError("a job type must not be empty")
        if job_type in self._specs:
            raise ValueError(f"a handler for {job_type!r} is already registered")
        self._specs[job_type] = HandlerSpec(job_type, fn, args, None if args is None else converter(args))

    def handler(self, job_type: str, *, args: Any = None) -> Callable[[F], F]:
        """Decorator: ``@registry.handler("job_type", args=ArgsType)``."""
        def register(fn: F) -> F:
            self.add(job_type, fn, args=args)
            return fn
        return register

    def spec(self, job_type: str) -> Optional[HandlerSpec]:
        return self._specs.get(job_type)

    def __getitem__(self, job_type: str) -> Handler:
        return self._specs[job_type].fn

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)
