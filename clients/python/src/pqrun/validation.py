"""Job args: a payload checked and converted to the type its handler was
registered with, before the handler runs.

``converter(tp)`` builds, once at registration, a function from a JSON
value to ``tp``. It knows dataclasses (fields by name; unknown keys and
missing required fields are errors), TypedDicts (their required keys),
str, int, float, bool, None, Any, Optional/Union, Literal, Enum, list,
tuple, set, dict (str keys), datetime/date/time (ISO 8601 strings),
timedelta (seconds), UUID and Decimal, nested as deep as needed, and any
class with pydantic's ``model_validate``. A value that does not fit raises
``ArgsError`` naming where in the payload and what was expected.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import datetime as dt
import decimal
import enum
import sys
import typing
import uuid
from typing import Any, Callable, Dict, List, Tuple

Convert = Callable[[Any], Any]

_UnionType: Any = getattr(__import__("types"), "UnionType", None)  # X | Y, Python 3.10+


class ArgsError(ValueError):
    """A payload that does not fit its args type; ``path`` says where."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


def _name(tp: Any) -> str:
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _got(value: Any) -> str:
    text = repr(value)
    return f"{_json_type(value)} {text if len(text) <= 40 else text[:37] + '...'}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _at(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def _fail(path: str, expected: str, value: Any) -> ArgsError:
    return ArgsError(path, f"expected {expected}, got {_got(value)}")


def _is_typeddict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__total__") and hasattr(tp, "__annotations__")


def converter(tp: Any) -> Convert:
    """``fn(payload)`` -> the payload as ``tp``, or ArgsError (path "" is the payload itself)."""
    inner = _build(tp)
    return lambda value: inner(value, "")


_Inner = Callable[[Any, str], Any]


def _build(tp: Any) -> _Inner:
    if tp is Any or tp is object:
        return lambda v, p: v
    if tp is None or tp is type(None):
        def none(v: Any, p: str) -> None:
            if v is not None:
                raise _fail(p, "null", v)
        return none
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or (_UnionType is not None and origin is _UnionType):
        return _union(tp, [_build(a) for a in args])
    if origin is typing.Literal:
        return _literal(args)
    if sys.version_info >= (3, 9) and origin is getattr(typing, "Annotated", None):
        return _build(args[0])
    if origin in (list, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable):
        return _list(_build(args[0]) if args else _build(Any), list)
    if origin in (set, frozenset, collections.abc.Set, collections.abc.MutableSet):
        return _list(_build(args[0]) if args else _build(Any), frozenset if origin is frozenset else set)
    if origin is tuple:
        return _tuple(args)
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        return _dict(_build(args[0]) if args else _build(str), _build(args[1]) if args else _build(Any))
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass(tp)
    if _is_typeddict(tp):
        return _typeddict(tp)
    if isinstance(tp, type):
        return _class(tp)
    raise TypeError(f"pqrun cannot check args of type {tp!r}")


def _scalar(tp: type, expected: str, ok: Callable[[Any], bool], make: Callable[[Any], Any]) -> _Inner:
    def convert(v: Any, p: str) -> Any:
        if isinstance(v, tp) and not (isinstance(v, bool) and tp is not bool):
            return v
        if ok(v):
            try:
                return make(v)
            except (ValueError, TypeError, ArithmeticError) as exc:
                raise ArgsError(p, f"expected {expected}, got {_got(v)} ({exc})") from None
        raise _fail(p, expected, v)
    return convert


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _iso(cls: Any) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        if sys.version_info < (3, 11) and text.endswith("Z"):
            text = text[:-1] + "+00:00"
        return cls.fromisoformat(text)
    return parse


def _class(tp: type) -> _Inner:
    if callable(getattr(tp, "model_validate", None)):  # pydantic v2
        validate: Callable[[Any], Any] = getattr(tp, "model_validate")

        def model(v: Any, p: str) -> Any:
            try:
                return validate(v)
            except ValueError as exc:
                raise ArgsError(p, str(exc)) from None
        return model
    if tp is bool:
        return _scalar(bool, "boolean", lambda v: False, bool)
    if tp is int:
        return _scalar(int, "integer", lambda v: isinstance(v, float) and v.is_integer(), int)
    if tp is float:
        return _scalar(float, "number", _number, float)
    if tp is str:
        return _scalar(str, "string", lambda v: False, str)
    if tp is decimal.Decimal:
        return _scalar(decimal.Decimal, "decimal", lambda v: isinstance(v, str) or _number(v),
                       lambda v: _finite(decimal.Decimal(str(v))))
    if tp is uuid.UUID:
        return _scalar(uuid.UUID, "UUID string", lambda v: isinstance(v, str), uuid.UUID)
    if tp is dt.datetime:
        return _scalar(dt.datetime, "ISO 8601 date-time string", lambda v: isinstance(v, str), _iso(dt.datetime))
    if tp is dt.date:
        return _scalar(dt.date, "ISO 8601 date string", lambda v: isinstance(v, str), _iso(dt.date))
    if tp is dt.time:
        return _scalar(dt.time, "ISO 8601 time string", lambda v: isinstance(v, str), _iso(dt.time))
    if tp is dt.timedelta:
        return _scalar(dt.timedelta, "seconds", _number, lambda v: dt.timedelta(seconds=v))
    if issubclass(tp, enum.Enum):
        values = ", ".join(repr(m.value) for m in tp)
        def member(v: Any, p: str) -> Any:
            try:
                return tp(v)
            except ValueError:
                raise _fail(p, f"one of {values}", v) from None
        return member
    if tp in (list, tuple, set, frozenset, dict):
        generic: Dict[Any, Any] = {list: List[Any], tuple: Tuple[Any, ...], set: typing.Set[Any],
                                   frozenset: typing.FrozenSet[Any], dict: Dict[str, Any]}
        return _build(generic[tp])
    raise TypeError(f"pqrun cannot check args of type {tp.__name__}: use a dataclass, a TypedDict, "
                    "a JSON type or a class with model_validate")


def _finite(d: decimal.Decimal) -> decimal.Decimal:
    if not d.is_finite():
        raise ValueError("not a finite number")
    return d


def _union(tp: Any, options: List[_Inner]) -> _Inner:
    expected = " | ".join(_name(a) for a in typing.get_args(tp))

    def convert(v: Any, p: str) -> Any:
        errors = []
        for option in options:
            try:
                return option(v, p)
            except ArgsError as exc:
                errors.append(exc)
        # One option's deeper error is clearer than "expected A | B".
        deep = [e for e in errors if e.path != p]
        if len(deep) == 1:
            raise deep[0]
        raise _fail(p, expected, v)
    return convert


def _literal(values: Tuple[Any, ...]) -> _Inner:
    expected = "one of " + ", ".join(repr(v) for v in values)

    def convert(v: Any, p: str) -> Any:
        for allowed in values:
            if v == allowed and type(v) is type(allowed):
                return allowed
        raise _fail(p, expected, v)
    return convert


def _list(item: _Inner, make: Callable[[Any], Any]) -> _Inner:
    def convert(v: Any, p: str) -> Any:
        if not isinstance(v, (list, tuple)):
            raise _fail(p, "array", v)
        return make(item(x, _at(p, i)) for i, x in enumerate(v))
    return convert


def _tuple(args: Tuple[Any, ...]) -> _Inner:
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        return _list(_build(args[0]) if args else _build(Any), tuple)
    items = [_build(a) for a in args]

    def convert(v: Any, p: str) -> Any:
        if not isinstance(v, (list, tuple)):
            raise _fail(p, "array", v)
        if len(v) != len(items):
            raise ArgsError(p, f"expected an array of {len(items)} items, got {len(v)}")
        return tuple(item(x, _at(p, i)) for i, (item, x) in enumerate(zip(items, v)))
    return convert


def _dict(key: _Inner, value: _Inner) -> _Inner:
    def convert(v: Any, p: str) -> Any:
        if not isinstance(v, dict):
            raise _fail(p, "object", v)
        return {key(k, _at(p, k)): value(x, _at(p, k)) for k, x in v.items()}
    return convert


def _fields(hints: Dict[str, Any]) -> Dict[str, _Inner]:
    return {name: _build(tp) for name, tp in hints.items()}


def _keys_check(v: Any, p: str, known: Any, required: Any, what: str) -> None:
    if not isinstance(v, dict):
        raise _fail(p, f"object ({what})", v)
    unknown = sorted(k for k in v if k not in known)
    if unknown:
        raise ArgsError(p, f"unknown field(s) {', '.join(map(repr, unknown))} for {what}")
    missing = [k for k in required if k not in v]
    if missing:
        raise ArgsError(p, f"missing required field(s) {', '.join(map(repr, missing))} for {what}")


def _dataclass(tp: type) -> _Inner:
    hints = typing.get_type_hints(tp)
    fields = [f for f in dataclasses.fields(tp) if f.init]
    convert_field = _fields({f.name: hints.get(f.name, Any) for f in fields})
    required = [f.name for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]

    def convert(v: Any, p: str) -> Any:
        if isinstance(v, tp):
            return v
        _keys_check(v, p, convert_field, required, tp.__name__)
        return tp(**{k: convert_field[k](x, _at(p, k)) for k, x in v.items()})
    return convert


def _typeddict(tp: type) -> _Inner:
    convert_field = _fields(typing.get_type_hints(tp))
    required = sorted(getattr(tp, "__required_keys__", convert_field if getattr(tp, "__total__", True) else ()))

    def convert(v: Any, p: str) -> Any:
        _keys_check(v, p, convert_field, required, tp.__name__)
        return {k: convert_field[k](x, _at(p, k)) for k, x in v.items()}
    return convert
