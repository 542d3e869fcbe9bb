"""Evaluate a parsed Logging query against a LogEntry dict, well enough for a fake server.

Semantics follow the Logging docs loosely: ``=`` compares case-insensitively, ``:`` is a
case-insensitive substring test, timestamps compare as instants, a bare value searches the
whole entry, and functions other than ``log_id`` match everything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from loopbreaker.diagnosis import lql
from loopbreaker.errors import InvalidContext
from loopbreaker.timeutil import parse_rfc3339


def matches(query: str, entry: Mapping[str, Any]) -> bool:
    expr = lql.parse(query)
    return True if expr is None else _eval(expr, entry)


def _eval(expr: lql.Expr, entry: Mapping[str, Any]) -> bool:
    if isinstance(expr, lql.BoolOp):
        results = (_eval(item, entry) for item in expr.items)
        return all(results) if expr.op == "AND" else any(results)
    if isinstance(expr, lql.Not):
        return not _eval(expr.item, entry)
    if isinstance(expr, lql.Restriction):
        target = expr.target
        if isinstance(target, lql.Call):
            return _call(target, entry)
        return target.text.lower() in json.dumps(entry).lower()
    left = expr.left
    if isinstance(left, lql.Call):
        return True
    found = _lookup(entry, left.segments)
    if found is _MISSING:
        return expr.op in ("!=", "!~")
    return _value_matches(expr.value, expr.op, found, left.dotted)


def _call(call: lql.Call, entry: Mapping[str, Any]) -> bool:
    if call.name == "log_id" and call.args and isinstance(call.args[0], lql.Value):
        return str(entry.get("logName", "")).endswith("/logs/" + quote(call.args[0].text, safe=""))
    return True


_MISSING = object()


def _lookup(entry: Mapping[str, Any], segments: tuple[str, ...]) -> Any:
    current: Any = entry
    for segment in segments:
        if not isinstance(current, Mapping) or segment not in current:
            return _MISSING
        current = current[segment]
    return current


def _value_matches(node: lql.ValueNode, op: str, found: Any, field: str) -> bool:
    if isinstance(node, lql.ValueList):
        results = (_value_matches(item, op, found, field) for item in node.items)
        if node.op == "NOT":
            return not next(results)
        return all(results) if node.op == "AND" else any(results)
    wanted = node.text
    actual = found if isinstance(found, str) else json.dumps(found)
    if op == ":":
        return wanted == "*" or wanted.lower() in actual.lower()
    if op in ("=~", "!~"):
        hit = re.search(wanted, actual) is not None
        return hit if op == "=~" else not hit
    if op in ("=", "!="):
        equal = actual.lower() == wanted.lower()
        return equal if op == "=" else not equal
    left, right = _comparable(actual, wanted, field)
    return {
        ">": left > right,
        "<": left < right,
        ">=": left >= right,
        "<=": left <= right,
    }[op]


def _comparable(actual: str, wanted: str, field: str) -> tuple[Any, Any]:
    if field in ("timestamp", "receiveTimestamp"):
        try:
            return parse_rfc3339(actual), parse_rfc3339(wanted)
        except InvalidContext:
            pass
    return actual, wanted
