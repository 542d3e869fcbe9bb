"""JSON values against a Google discovery document's schemas (the walker behind
:mod:`contracts.discovery`).

Every rule reads the document: ``type``/``format``/``enum``/``items``/``properties``/
``additionalProperties``/``$ref``/``readOnly`` of a schema, and the phrasing of its
``description`` where the document says in prose what a field allows. Sources:

* the discovery document format: "Discovery Document" reference,
  developers.google.com/discovery/v1/reference/apis (``type``, ``format``, ``enum``,
  ``$ref``, ``additionalProperties``, ``readOnly``, ``repeated``);
* JSON encoding of the formats: the proto3 JSON mapping,
  protobuf.dev/programming-guides/json/ ("int64, fixed64, uint64: JSON value will be a
  decimal string. Either numbers or strings are accepted"; "int32, fixed32, uint32: JSON
  value will be a decimal number. Either numbers or strings are accepted"; Timestamp as
  RFC 3339; "fields set to default values are omitted" by a printer, so a server answers
  no ``null``);
* the prose markers, as both documents shipped with google-api-python-client 2.202.0 write
  them (``compute.v1.json`` revision 20261106, ``chat.v1.json`` revision 20261107): a
  sentence opening with ``[Output Only]``/``Output only.`` (1,839 and 1,493 fields in
  compute.v1.json), ``[Input Only]``/``Input only.``, ``Required.``/``Required field,``/
  ``[Required]``/``Required in this object.``; conditional forms ("Required if ...",
  "Required when ...", "Output only for other usage") are not rules. And "only allows X",
  which narrows an enum (compute.v1.json ``InstancesReportHostAsFaultyRequest.
  disruptionSchedule``: "Required field, only allows IMMEDIATE."); and "must be a valid
  UUID" (with "zero UUID is not supported"), which compute.v1.json says of ``requestId``.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import re
import uuid
from dataclasses import dataclass
from typing import Any

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_REQUIRED = re.compile(r"^(?:\[Required\]|Required(?:[.,:]|\s+field\b|\s+in this object\b|$))")
_OUTPUT_ONLY = re.compile(r"^(?:\[Output Only\]|Output only(?:[.,:]|$))", re.IGNORECASE)
_INPUT_ONLY = re.compile(r"^(?:\[Input Only\]|Input only(?:[.,:]|$))", re.IGNORECASE)
_ONLY_ALLOWS = re.compile(
    r"\bonly allows? ([A-Z][A-Z0-9_]*(?:(?:\s*,\s*(?:or\s+|and\s+)?|\s+or\s+|\s+and\s+)"
    r"[A-Z][A-Z0-9_]*)*)"
)
_ENUM_WORD = re.compile(r"[A-Z][A-Z0-9_]*")
#: compute.v1.json, every ``requestId`` (485 times): "The request ID must be a valid UUID with
#: the exception that zero UUID is not supported (00000000-0000-0000-0000-000000000000)."
_MUST_BE_UUID = re.compile(r"\bmust\s+be\s+a\s+valid\s+UUID\b")
_ZERO_UUID_REFUSED = re.compile(r"zero\s+UUID\s+is\s+not\s+supported")
_RFC3339 = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)$", re.IGNORECASE
)
_DATE = re.compile(r"^\d{4}-\d\d-\d\d$")
_DURATION = re.compile(r"^-?\d+(?:\.\d{1,9})?s$")
_INT = re.compile(r"^-?\d+$")
_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}


@dataclass(frozen=True)
class Flags:
    """What a property's description (and ``readOnly``) says of it."""

    required: bool = False
    output_only: bool = False
    input_only: bool = False
    #: Enum values the description narrows the field to ("only allows IMMEDIATE").
    only: frozenset[str] | None = None
    #: "must be a valid UUID"; "zero UUID is not supported".
    uuid: bool = False
    zero_uuid_refused: bool = False


@functools.lru_cache(maxsize=8192)
def description_flags(description: str, enum: tuple[str, ...] = ()) -> Flags:
    """The unconditional rules a description states, sentence by sentence."""
    sentences = [s.strip() for s in _SENTENCE_END.split(description or "") if s.strip()]
    required = any(_REQUIRED.match(s) for s in sentences)
    output_only = any(_OUTPUT_ONLY.match(s) for s in sentences)
    input_only = any(_INPUT_ONLY.match(s) for s in sentences)
    only: frozenset[str] | None = None
    for match in _ONLY_ALLOWS.finditer(description or ""):
        # Only words that are values of this field's enum: "only allows access" is prose.
        named = {w for w in _ENUM_WORD.findall(match.group(1)) if w in enum}
        if named:
            only = (only or frozenset()) | named
    uuid = bool(_MUST_BE_UUID.search(description or ""))
    zero = bool(_ZERO_UUID_REFUSED.search(description or ""))
    return Flags(required, output_only, input_only, only, uuid, zero)


def uuid_problem(flags: Flags, value: str) -> str | None:
    """Why ``value`` is not the UUID the description asks for, or None."""
    if not flags.uuid:
        return None
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return f"{value!r} is not a valid UUID, which the description requires"
    if flags.zero_uuid_refused and parsed.int == 0:
        return "the zero UUID, which the description says is not supported"
    return None


def flags_of(schema: dict[str, Any]) -> Flags:
    flags = description_flags(schema.get("description", ""), tuple(schema.get("enum") or ()))
    if schema.get("readOnly"):
        flags = dataclasses.replace(flags, output_only=True)
    return flags


@dataclass(frozen=True)
class Found:
    where: str
    message: str
    #: JSON pointer into the document where the rule is.
    pointer: str


class SchemaWalker:
    """Checks one JSON value; ``direction`` is "request" or "response"."""

    def __init__(self, schemas: dict[str, Any], direction: str, *, int_enums: bool = False) -> None:
        self.schemas = schemas
        self.direction = direction
        #: The request asked ``$alt=json;enum-encoding=int``: enums travel as their numbers
        #: (proto3 JSON: "Parsers accept both enum names and integer values"); the document
        #: gives no numbers, so such a value is taken unchecked.
        self.int_enums = int_enums
        self.found: list[Found] = []

    def _add(self, where: str, message: str, pointer: str) -> None:
        self.found.append(Found(where, message, pointer))

    def resolve(self, schema: dict[str, Any], pointer: str) -> tuple[dict[str, Any], str]:
        seen = 0
        while "$ref" in schema and seen < 50:
            name = schema["$ref"]
            pointer = f"schemas/{name}"
            schema = self.schemas[name]
            seen += 1
        return schema, pointer

    def check(self, schema: dict[str, Any], value: Any, where: str, pointer: str) -> None:
        flags = flags_of(schema)
        resolved, pointer = self.resolve(schema, pointer)
        kind = resolved.get("type", "object" if "properties" in resolved else "any")
        if value is None:
            # A null is a value only inside a Struct ("any"): a field is omitted when unset.
            if self.direction == "response" and kind != "any":
                self._add(where, "null: a Google API omits unset fields (proto3 JSON)", pointer)
            return
        checker = getattr(self, f"_{kind}", None)
        if checker is None:
            return  # "any" and types the format does not constrain
        checker(resolved, value, where, pointer, flags)

    # --- scalars ------------------------------------------------------------------------

    def _string(
        self, schema: dict[str, Any], value: Any, where: str, pointer: str, flags: Flags
    ) -> None:
        fmt = schema.get("format", "")
        if fmt in _RANGES:
            self._integer_text(value, fmt, where, pointer)
            return
        if self.int_enums and schema.get("enum") and isinstance(value, int):
            return
        if not isinstance(value, str):
            self._add(where, f"{type(value).__name__} {value!r} where a string is", pointer)
            return
        self._format(fmt, value, where, pointer)
        self._enum(schema, value, where, pointer, flags)
        if (problem := uuid_problem(flags, value)) is not None:
            self._add(where, problem, pointer)

    def _integer_text(self, value: Any, fmt: str, where: str, pointer: str) -> None:
        # proto3 JSON: a 64-bit integer is printed as a decimal string; parsers accept both.
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            self._add(where, f"{value!r} is not a {fmt} (a decimal string)", pointer)
            return
        if isinstance(value, int) and self.direction == "response":
            self._add(where, f"{fmt} {value} as a number: Google prints it as a string", pointer)
        text = str(value)
        if not _INT.match(text):
            self._add(where, f"{value!r} is not a decimal {fmt}", pointer)
            return
        low, high = _RANGES[fmt]
        if not low <= int(text) <= high:
            self._add(where, f"{value!r} is out of range for {fmt}", pointer)

    def _format(self, fmt: str, value: str, where: str, pointer: str) -> None:
        # The formats of "Type and format summary", developers.google.com/discovery/v1/
        # type-format: google-datetime/date-time RFC 3339, date, google-duration "3.5s",
        # byte base64 (URL-safe accepted).
        if fmt in ("google-datetime", "date-time") and not _RFC3339.match(value):
            self._add(where, f"{value!r} is not an RFC 3339 timestamp ({fmt})", pointer)
        elif fmt == "date" and not _DATE.match(value):
            self._add(where, f"{value!r} is not a date (YYYY-MM-DD)", pointer)
        elif fmt == "google-duration" and not _DURATION.match(value):
            self._add(where, f"{value!r} is not a duration such as '3.5s'", pointer)
        elif fmt == "byte":
            try:
                base64.b64decode(value.replace("-", "+").replace("_", "/"), validate=True)
            except (binascii.Error, ValueError):
                self._add(where, f"{value[:40]!r} is not base64 (format byte)", pointer)

    def _enum(
        self, schema: dict[str, Any], value: str, where: str, pointer: str, flags: Flags
    ) -> None:
        # ``enum`` of the schema (Discovery Document reference); then the description's
        # "only allows X", for what a request may send.
        enum = schema.get("enum")
        if enum and value not in enum:
            self._add(where, f"{value!r} is not one of {sorted(enum)}", pointer)
        elif flags.only is not None and self.direction == "request" and value not in flags.only:
            self._add(
                where,
                f"{value!r} is refused: the description says only {sorted(flags.only)} "
                f"({_quote_only(schema.get('description', ''))!r})",
                pointer,
            )

    def _integer(
        self, schema: dict[str, Any], value: Any, where: str, pointer: str, flags: Flags
    ) -> None:
        # proto3 JSON: an int32/uint32 "will be a decimal number. Either numbers or strings
        # are accepted" by a parser, so a request may quote it; a response never does.
        fmt = schema.get("format", "int32")
        ok_text = self.direction == "request" and isinstance(value, str) and _INT.match(value)
        if isinstance(value, bool) or not (isinstance(value, int) or ok_text):
            self._add(where, f"{value!r} is not an integer ({fmt})", pointer)
            return
        low, high = _RANGES.get(fmt, _RANGES["int64"])
        if not low <= int(value) <= high:
            self._add(where, f"{value!r} is out of range for {fmt}", pointer)

    def _number(
        self, schema: dict[str, Any], value: Any, where: str, pointer: str, flags: Flags
    ) -> None:
        specials = ("NaN", "Infinity", "-Infinity")
        if isinstance(value, bool) or not (isinstance(value, (int, float)) or value in specials):
            self._add(where, f"{value!r} is not a number", pointer)

    def _boolean(
        self, schema: dict[str, Any], value: Any, where: str, pointer: str, flags: Flags
    ) -> None:
        if not isinstance(value, bool):
            self._add(where, f"{value!r} is not a boolean", pointer)

    # --- containers ---------------------------------------------------------------------

    def _array(
        self, schema: dict[str, Any], value: Any, where: str, pointer: str, flags: Flags
    ) -> None:
        if not isinstance(value, list):
            self._add(where, f"{type(value).__name__} where an array is", pointer)
            return
        items = schema.get("items") or {}
        for index, item in enumerate(value):
            self.check(items, item, f"{where}[{index}]", f"{pointer}/items")

    def _object(
        self, schema: dict[str, Any], value: Any, where: str, pointer: str, flags: Flags
    ) -> None:
        if not isinstance(value, dict):
            self._add(where, f"{type(value).__name__} where an object is", pointer)
            return
        # ``properties`` name every field; ``additionalProperties`` is "the schema for any
        # additional properties with dynamic keys" (Discovery Document reference). With
        # neither, the object is free-form. Any other key is unknown to the API.
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if properties is None and extra is None:
            return  # a free-form object
        for key, item in value.items():
            sub = f"{where}.{key}" if where else key
            if properties is not None and key in properties:
                prop = properties[key]
                self._direction_rules(prop, sub, f"{pointer}/properties/{key}")
                self.check(prop, item, sub, f"{pointer}/properties/{key}")
            elif extra is not None:
                self.check(extra, item, sub, f"{pointer}/additionalProperties")
            else:
                self._add(sub, f"unknown field {key!r}", f"{pointer}/properties")
        for key, prop in (properties or {}).items():
            # An empty string or list is unset in proto3: a Required field needs a value.
            unset = key not in value or (self.direction == "request" and value[key] in ("", []))
            if unset and flags_of(prop).required:
                sub = f"{where}.{key}" if where else key
                self._add(
                    sub, "missing: the description says Required", f"{pointer}/properties/{key}"
                )

    def _direction_rules(self, prop: dict[str, Any], where: str, pointer: str) -> None:
        # "[Output Only]"/"Output only."/readOnly: the server sets it, a request may not;
        # "[Input Only]"/"Input only.": the server never answers it (description markers).
        flags = flags_of(prop)
        if self.direction == "request" and flags.output_only:
            self._add(where, "an Output Only field sent in a request", pointer)
        if self.direction == "response" and flags.input_only:
            self._add(where, "an Input Only field in a response", pointer)


def _quote_only(description: str) -> str:
    match = re.search(r"[^.]*\bonly allows?[^.]*\.?", description)
    return match.group(0).strip() if match else description[:80]
