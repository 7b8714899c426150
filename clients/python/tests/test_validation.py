"""Args types: payloads converted to dataclasses, TypedDicts and the JSON
types, and the messages for those that do not fit (no server needed)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import uuid
from decimal import Decimal
from typing import Any, Dict, List, Literal, Optional, Tuple, TypedDict, Union

import pytest

import pqrun
from pqrun.jobs import dumps
from pqrun.registry import HandlerSpec
from pqrun.validation import ArgsError, converter


class Size(enum.Enum):
    SMALL = "s"
    LARGE = "l"


@dataclasses.dataclass
class Address:
    city: str
    zip: Optional[str] = None


@dataclasses.dataclass
class Order:
    id: int
    total: Decimal
    placed: dt.datetime
    size: Size
    items: List[str] = dataclasses.field(default_factory=list)
    ship_to: Optional[Address] = None
    mode: Literal["air", "sea"] = "sea"
    ref: Union[int, str] = 0
    window: Tuple[int, int] = (0, 0)
    token: Optional[uuid.UUID] = None
    wait: dt.timedelta = dt.timedelta(0)
    weight: float = 0.0
    notes: Dict[str, Any] = dataclasses.field(default_factory=dict)


class Tag(TypedDict, total=False):
    name: str
    weight: float


def test_a_payload_becomes_its_dataclass_and_back():
    token = uuid.uuid4()
    order = converter(Order)({
        "id": 7, "total": "12.50", "placed": "2024-05-01T10:00:00+00:00", "size": "l", "items": ["a", "b"],
        "ship_to": {"city": "Lyon"}, "mode": "air", "ref": "R-1", "window": [8, 17], "token": str(token),
        "wait": 90, "weight": 3, "notes": {"gift": True}})
    assert order == Order(7, Decimal("12.50"), dt.datetime(2024, 5, 1, 10, tzinfo=dt.timezone.utc), Size.LARGE,
                          ["a", "b"], Address("Lyon"), "air", "R-1", (8, 17), token, dt.timedelta(seconds=90), 3.0,
                          {"gift": True})
    assert isinstance(order.weight, float)
    # What a producer sends for it converts back to the same object.
    import json

    assert converter(Order)(json.loads(dumps(order))) == order
    assert converter(Tag)({"weight": 1}) == {"weight": 1.0}
    assert converter(Any)([1, "x"]) == [1, "x"] and converter(dict)({"a": 1}) == {"a": 1}


@pytest.mark.parametrize("payload, message", [
    ([1], "expected object (Order), got array [1]"),
    ({"total": 1, "placed": "2024-01-01", "size": "s"}, "missing required field(s) 'id' for Order"),
    ({"id": 1, "total": 1, "placed": "2024-01-01", "size": "s", "colour": 1}, "unknown field(s) 'colour' for Order"),
    ({"id": True, "total": 1, "placed": "2024-01-01", "size": "s"}, "id: expected integer, got boolean True"),
    ({"id": 1.5, "total": 1, "placed": "2024-01-01", "size": "s"}, "id: expected integer, got number 1.5"),
    ({"id": 1, "total": "NaN", "placed": "2024-01-01", "size": "s"}, "total: expected decimal"),
    ({"id": 1, "total": 1, "placed": "yesterday", "size": "s"}, "placed: expected ISO 8601 date-time string"),
    ({"id": 1, "total": 1, "placed": "2024-01-01", "size": "m"}, "size: expected one of 's', 'l', got string 'm'"),
    ({"id": 1, "total": 1, "placed": "2024-01-01", "size": "s", "items": ["a", 2]},
     "items[1]: expected string, got number 2"),
    ({"id": 1, "total": 1, "placed": "2024-01-01", "size": "s", "ship_to": {"city": None}},
     "ship_to.city: expected string, got null None"),
    ({"id": 1, "total": 1, "placed": "2024-01-01", "size": "s", "mode": "rail"},
     "mode: expected one of 'air', 'sea', got string 'rail'"),
    ({"id": 1, "total": 1, "placed": "2024-01-01", "size": "s", "ref": [1]}, "ref: expected int | str, got array"),
    ({"id": 1, "total": 1, "placed": "2024-01-01", "size": "s", "window": [1]},
     "window: expected an array of 2 items, got 1"),
])
def test_a_payload_that_does_not_fit_says_where_and_why(payload, message):
    with pytest.raises(ArgsError) as err:
        converter(Order)(payload)
    assert message in str(err.value)


def test_invalid_args_are_a_terminal_error():
    spec = HandlerSpec("ship", lambda ctx: None, Address, converter(Address))
    with pytest.raises(pqrun.InvalidArgs) as err:
        spec.args({"city": 5})
    assert isinstance(err.value, pqrun.TerminalError)
    assert str(err.value) == "invalid args for job type 'ship' (Address): city: expected string, got number 5"


def test_types_it_cannot_check_are_refused_at_registration():
    class Opaque:
        pass

    with pytest.raises(TypeError, match="cannot check args of type Opaque"):
        pqrun.Registry().add("x", lambda ctx: None, args=Opaque)
