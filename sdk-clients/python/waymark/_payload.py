"""JSON values to and from the wire's `Payload` (a `google.protobuf.Value`).

`Value` carries every number as a double; integral values come back as `int` so a workflow
that was given `3` reads `3`, not `3.0` (the Rust SDK reads them the same way).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

from ._proto import types_pb2

_INT_LIMIT = 2.0**63


def to_value(obj: Any) -> struct_pb2.Value:
    v = struct_pb2.Value()
    if obj is None:
        v.null_value = struct_pb2.NULL_VALUE
    elif isinstance(obj, bool):
        v.bool_value = obj
    elif isinstance(obj, int | float):
        if isinstance(obj, float) and not math.isfinite(obj):
            raise TypeError(f"{obj!r} is not a JSON number")
        v.number_value = float(obj)
    elif isinstance(obj, str):
        v.string_value = obj
    elif isinstance(obj, Mapping):
        # Set even when empty: a `{}` with no fields added would otherwise go out as no value
        # at all, which reads back as null.
        v.struct_value.SetInParent()
        for key, item in obj.items():
            if not isinstance(key, str):
                raise TypeError(f"JSON object keys are strings, not {type(key).__name__}")
            v.struct_value.fields[key].CopyFrom(to_value(item))
    elif isinstance(obj, list | tuple):
        v.list_value.SetInParent()
        for item in obj:
            v.list_value.values.append(to_value(item))
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_value(dataclasses.asdict(obj))
    else:
        raise TypeError(f"{type(obj).__name__} is not JSON: use dicts, lists, str, numbers")
    return v


def from_value(v: struct_pb2.Value) -> Any:
    kind = v.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "bool_value":
        return v.bool_value
    if kind == "number_value":
        n = v.number_value
        if n.is_integer() and -_INT_LIMIT < n < _INT_LIMIT:
            return int(n)
        return n
    if kind == "string_value":
        return v.string_value
    if kind == "struct_value":
        return {k: from_value(item) for k, item in v.struct_value.fields.items()}
    return [from_value(item) for item in v.list_value.values]


def to_payload(obj: Any) -> types_pb2.Payload:
    return types_pb2.Payload(json=to_value(obj))


def from_payload(p: types_pb2.Payload | None) -> Any:
    """The JSON value a payload carries; an empty (or absent) payload is `None`."""
    if p is None:
        return None
    which = p.WhichOneof("content")
    if which == "json":
        return from_value(p.json)
    if which == "binary":
        raise ValueError(f"payload is encoded as {p.encoding!r}; this SDK reads JSON only")
    return None
