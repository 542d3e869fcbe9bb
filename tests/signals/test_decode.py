"""The hardened JSON decoder: any input is a value or an InvalidJson naming the problem."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import json_values

from loopbreaker.errors import InvalidInput
from loopbreaker.signals import decode
from loopbreaker.signals.decode import MAX_DEPTH, InvalidJson


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_ordinary_json_decodes_as_json_does() -> None:
    text = '{"a": [1, 2.5, "x", true, null], "b": {"c": "\\u00e9\\ud83d\\ude00"}}'
    assert decode.loads(text) == json.loads(text)
    assert decode.loads(text.encode()) == json.loads(text)
    assert decode.loads(text)["b"]["c"] == "é😀"  # a surrogate *pair* is one character


def test_nul_is_valid_unicode_and_kept() -> None:
    assert decode.loads(b'{"a": "x\\u0000y"}') == {"a": "x\x00y"}


@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 500, 5000, 200_000])
def test_nesting_past_the_limit_is_refused_never_a_recursion_error(levels: int) -> None:
    with pytest.raises(InvalidJson, match="body nests too deeply") as caught:
        decode.loads(nested(levels).encode(), what="body")
    assert not caught.value.syntax


def test_nesting_up_to_the_limit_is_accepted() -> None:
    value = decode.loads(nested(MAX_DEPTH))
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []
    objects = '{"a":' * MAX_DEPTH + "1" + "}" * MAX_DEPTH
    assert decode.loads(objects)["a"]["a"]["a"] is not None
    with pytest.raises(InvalidJson, match="nests too deeply"):
        decode.loads('{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1))


def test_a_number_too_long_for_python_is_refused() -> None:
    limit = sys.get_int_max_str_digits()
    assert decode.loads("9" * limit) == int("9" * limit)
    with pytest.raises(InvalidJson, match=f"number too long to read \\(over {limit} digits\\)"):
        decode.loads(b'{"n": ' + b"1" * (limit + 1) + b"}", what="message.data")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("NaN", "NaN, which is not JSON"),
        ('{"x": Infinity}', "Infinity, which is not JSON"),
        ("[-Infinity]", "-Infinity, which is not JSON"),
        ("1e999", "a number out of range (1e999)"),
        ("[-1e400]", "a number out of range (-1e400)"),
    ],
)
def test_values_json_does_not_have_are_refused(text: str, words: str) -> None:
    with pytest.raises(InvalidJson) as caught:
        decode.loads(text)
    assert words in caught.value.reason and not caught.value.syntax


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b'{"a": "\xff"}', "not UTF-8 text: invalid start byte at byte 7"),
        # UTF-16 with a BOM: json.loads would guess the encoding, this decoder does not.
        ('{"a": 1}'.encode("utf-16"), "not UTF-8 text"),
        # An encoded surrogate (CESU-8) is not UTF-8 either.
        (b'"\xed\xa0\x80"', "not UTF-8 text"),
    ],
)
def test_bytes_must_be_utf8(raw: bytes, words: str) -> None:
    with pytest.raises(InvalidJson, match="body is " + words.split(":")[0]) as caught:
        decode.loads(raw, what="body")
    assert words in caught.value.reason


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('"\\ud800"', "a lone surrogate \\ud800 at $"),
        ('{"insertId": "i\\udfff"}', "a lone surrogate \\udfff at $.insertId"),
        ('{"a": [{"b": "x\\uDC00y"}]}', "a lone surrogate \\udc00 at $.a[0].b"),
        ('{"k\\ud800": 1}', "a lone surrogate \\ud800 in a key at $"),
        ('"\\ude00\\ud83d"', "a lone surrogate \\ude00 at $"),  # a pair in the wrong order
    ],
)
def test_lone_surrogates_are_refused_with_their_path(text: str, where: str) -> None:
    with pytest.raises(InvalidJson) as caught:
        decode.loads(text.encode(), what="body")
    assert caught.value.reason == f"body holds {where}"


def test_surrogates_already_in_a_str_are_refused() -> None:
    with pytest.raises(InvalidJson, match="lone surrogate"):
        decode.loads('{"a": "\udc80"}')


def test_syntax_errors_say_where_and_are_marked_as_syntax() -> None:
    with pytest.raises(InvalidJson) as caught:
        decode.loads('{"a": 1,\n "b": }', what="payload")
    assert caught.value.syntax and caught.value.pos == 15
    assert caught.value.reason == "payload is not JSON: Expecting value (line 2 column 7)"
    assert isinstance(caught.value, InvalidInput)


def test_without_a_name_the_reason_starts_with_the_problem() -> None:
    with pytest.raises(InvalidJson) as caught:
        decode.loads("{")
    assert caught.value.reason.startswith("not JSON: ")


def test_a_size_limit_is_checked_before_decoding() -> None:
    with pytest.raises(InvalidJson, match="body is 11 bytes, over the limit of 10"):
        decode.loads(b'"123456789"', what="body", max_bytes=10)
    assert decode.loads(b'"12345678"', max_bytes=10) == "12345678"


def test_decode_at_reads_one_value_inside_a_larger_text() -> None:
    text = '[{"a": 1}, [2, 3], "x\\\\", 4.5]'
    value, end = decode.decode_at(text, 1)
    assert (value, text[end]) == ({"a": 1}, ",")
    value, end = decode.decode_at(text, 11)
    assert (value, text[end]) == ([2, 3], ",")
    assert decode.decode_at(text, 19)[0] == "x\\"


def test_decode_at_marks_a_value_cut_short_as_syntax_counted_from_its_start() -> None:
    with pytest.raises(InvalidJson) as caught:
        decode.decode_at('xxxx{"a": ', 4)
    assert caught.value.syntax
    assert "character 7 of the item" in caught.value.reason


def test_decode_at_applies_the_limits() -> None:
    for bad, words in ((nested(100), "nests too deeply"), ('"\\ud800"', "lone surrogate")):
        with pytest.raises(InvalidJson, match=words) as caught:
            decode.decode_at(f"[{bad}]", 1)
        assert not caught.value.syntax
    # Bytes a surrogateescape reader could not decode as UTF-8.
    with pytest.raises(InvalidJson, match="not UTF-8"):
        decode.decode_at('["a\udcff"]', 1)


def test_check_applies_the_rules_to_decoded_values() -> None:
    decode.check({"a": ["b", 1, None, {"c": "d\x00"}]})
    with pytest.raises(
        InvalidJson, match="event data holds a lone surrogate \\\\ud800 at \\$.m.id"
    ):
        decode.check({"m": {"id": "\ud800"}}, what="event data")
    value: list[object] = []
    for _ in range(MAX_DEPTH):
        value = [value]
    with pytest.raises(InvalidJson, match="nests too deeply"):
        decode.check(value)


def test_escaping_surrogates_is_consistent_and_always_utf8() -> None:
    assert decode.escape_surrogates("plain é") == "plain é"
    escaped = decode.escape_surrogates("c\ud800x")
    assert escaped == "c\\ud800x" and escaped == decode.escape_surrogates("c\ud800x")
    assert decode.escape_surrogates("\ud800") != decode.escape_surrogates("\udc00")
    escaped.encode("utf-8")


@pytest.mark.parametrize(
    ("value", "name"),
    [(None, "null"), (True, "a boolean"), (1, "a number"), (1.5, "a number"), ("", "a string")]
    + [([], "an array"), ({}, "an object")],
)
def test_type_names(value: object, name: str) -> None:
    assert decode.type_name(value) == name


JSON = json_values(max_size=4, max_leaves=20)


def _all_text(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _all_text(v)]
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in [k, *_all_text(v)]]
    return []


@settings(max_examples=200, derandomize=True)
@given(JSON)
def test_every_json_value_round_trips(value: object) -> None:
    assert decode.loads(json.dumps(value).encode()) == value


@settings(max_examples=300, derandomize=True)
@given(
    st.binary(max_size=200)
    | st.text(max_size=200).map(str.encode)
    | JSON.map(lambda v: json.dumps(v).encode())
)
def test_any_bytes_give_a_value_of_valid_unicode_or_a_clear_refusal(raw: bytes) -> None:
    try:
        value = decode.loads(raw)
    except InvalidJson as exc:
        assert exc.reason
        return
    for text in _all_text(value):
        text.encode("utf-8")  # never a lone surrogate


def test_a_refusal_names_what_was_decoded_and_the_problem() -> None:
    for decode_one in (
        lambda t: decode.loads(t, what="the body"),
        lambda t: decode.decode_at(t, 0, what="the body"),
    ):
        with pytest.raises(decode.InvalidJson) as caught:
            decode_one('{"x": [NaN]}')
        assert caught.value.reason == "the body holds NaN, which is not JSON"


# --- the quick decoder: a subset of what loads() accepts, the same values ------------------


def same(a: object, b: object) -> bool:
    """Equal values of the same types all the way down (1 == 1.0 == True would pass ==),
    and objects with their keys in the same order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return repr(a) == repr(b)  # -0.0 and 0.0 too
    return a == b


NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=2**63 - 2, max_value=2**64 + 2),
    st.integers(min_value=-(2**64), max_value=-(2**63) + 2),
    st.from_regex(r"\A-?(0|[1-9][0-9]{0,40})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,4})?\Z"),
)
# Texts as writers make them: json.dumps of values, raw number forms, duplicate keys,
# escapes (surrogate pairs and lone ones), nesting around the limit, and broken bytes.
TEXTS = st.one_of(
    JSON.map(lambda v: json.dumps(v)),
    JSON.map(lambda v: json.dumps(v, ensure_ascii=False)),
    NUMBERS.map(str),
    st.lists(st.tuples(st.sampled_from("abc"), NUMBERS.map(str)), max_size=5).map(
        lambda kv: "{" + ", ".join(f'"{k}": {v}' for k, v in kv) + "}"
    ),
    st.lists(
        st.sampled_from(["\\ud83d\\ude00", "\\ud800", "\\udc00", "\\u00e9", "\\n", "x", "\\/"]),
        max_size=4,
    ).map(lambda parts: '"' + "".join(parts) + '"'),
    st.integers(min_value=MAX_DEPTH - 2, max_value=MAX_DEPTH + 2).map(nested),
    st.sampled_from(["NaN", "Infinity", "1e999", "-1e400", "[1,]", "01", " {} ", "{} x"]),
)


def _full(data: bytes) -> tuple[str, object]:
    try:
        return "value", decode.loads(data)
    except InvalidJson as exc:
        return "refused", exc.reason


@settings(max_examples=600, derandomize=True)
@given(
    TEXTS.map(str.encode)
    | st.binary(max_size=120)
    | TEXTS.map(lambda t: b"\xef\xbb\xbf" + t.encode())
)
def test_the_quick_decoder_accepts_only_what_loads_accepts_and_gives_the_same_value(
    data: bytes,
) -> None:
    quick = decode.quick_decoder()
    full = _full(data)
    for form in (data, data.decode("utf-8", "surrogateescape")):
        value = quick(form)
        if value is decode.UNDECIDED:
            continue
        assert full[0] == "value", (data, full)
        assert same(value, full[1]), (data, value, full[1])


def test_bulk_loads_answers_as_loads_does() -> None:
    bulk = decode.bulk_loads()
    for data in (
        b'{"a": [1, 2.5e3, "\\u00e9"]}',
        b"18446744073709551616",
        nested(MAX_DEPTH).encode(),
    ):
        assert same(bulk(data), decode.loads(data))
    # What msgspec refuses, loads() names, word for word.
    for data in (b"NaN", b'"\\ud800"', nested(MAX_DEPTH + 1).encode(), b"\xff", b"[1,]"):
        with pytest.raises(InvalidJson) as quick_caught:
            bulk(data)
        with pytest.raises(InvalidJson) as full_caught:
            decode.loads(data)
        assert quick_caught.value.reason == full_caught.value.reason


def test_the_quick_decoder_takes_what_most_files_hold() -> None:
    # Not vacuous: ordinary LogEntries are taken by the quick path, not handed on.
    quick = decode.quick_decoder()
    entry = {"insertId": "1", "resource": {"type": "k8s_container"}, "textPayload": "é"}
    assert quick(json.dumps(entry).encode()) == entry
    assert quick(json.dumps(entry)) == entry
