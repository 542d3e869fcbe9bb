"""The streaming file reader: every layout, every item with its position, bounded memory."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import json_values

from loopbreaker.errors import InvalidInput
from loopbreaker.signals import files


def read(*paths: Path, **options: int) -> list[files.Item]:
    return list(files.read(list(paths), **options))


def rows(items: list[files.Item]) -> list[tuple[str, object, str | None]]:
    """(file name and position, value, first words of the error)."""
    return [
        (i.source.rsplit("/", 1)[1], i.value, i.error.split(":")[0] if i.error else None)
        for i in items
    ]


def test_an_array_a_document_and_json_lines_with_positions(tmp_path: Path) -> None:
    array = tmp_path / "a.json"
    array.write_text('[{"a": 1},\n {"b": 2}, 3, "x", null]')
    document = tmp_path / "b.json"
    document.write_text('{\n  "specversion": "1.0",\n  "data": [1, 2]\n}\n')
    one_line = tmp_path / "c.json"
    one_line.write_text('{"c": 3}\n')
    lines = tmp_path / "d.jsonl"
    lines.write_text('{"d": 4}\n\n  \nnot json\n{"e": 5}\r\n')
    empty = tmp_path / "e.jsonl"
    empty.write_text(" \n\n")
    items = read(array, document, one_line, lines, empty)
    assert [i.index for i in items] == list(range(10))
    assert rows(items) == [
        ("a.json[0]", {"a": 1}, None),
        ("a.json[1]", {"b": 2}, None),
        ("a.json[2]", 3, None),
        ("a.json[3]", "x", None),
        ("a.json[4]", None, None),
        ("b.json", {"specversion": "1.0", "data": [1, 2]}, None),
        ("c.json", {"c": 3}, None),
        ("d.jsonl:1", {"d": 4}, None),
        ("d.jsonl:4", None, "not JSON"),
        ("d.jsonl:5", {"e": 5}, None),
    ]
    assert items[0].path == array and not any(i.fatal for i in items)


def test_a_bom_and_leading_white_space_are_skipped(tmp_path: Path) -> None:
    array = tmp_path / "a.json"
    array.write_bytes(b'\xef\xbb\xbf \n [{"a": 1}]')
    lines = tmp_path / "b.jsonl"
    lines.write_bytes(b'\xef\xbb\xbf{"b": 2}\n{"c": 3}\n')
    assert [i.value for i in read(array, lines)] == [{"a": 1}, {"b": 2}, {"c": 3}]
    assert read(Path(tmp_path / "a.json"), chunk=1)[0].value == {"a": 1}


BAD_ITEMS = [
    ("[" * 1000 + "]" * 1000, "nests too deeply"),
    ('{"n": ' + "1" * 4400 + "}", "a number too long"),
    ('{"insertId": "\\ud800"}', "a lone surrogate \\ud800 at $.insertId"),
    ('{"x": NaN}', "NaN, which is not JSON"),
    ('{"y": tru}', "not JSON"),
    ('{"z": [1, 2,, 3]}', "not JSON"),
]


@pytest.mark.parametrize("chunk", [1, 3, 64, files.CHUNK])
def test_bad_items_in_an_array_are_refused_and_the_rest_is_read(tmp_path: Path, chunk: int) -> None:
    # Strings full of brackets, commas and escapes must not confuse finding an item's end.
    tricky = {"s": '],[{"\\', "t": ["a,b", "}"]}
    parts = [json.dumps({"ok": 0})]
    for text, _ in BAD_ITEMS:
        parts += [text, json.dumps(tricky)]
    path = tmp_path / "dead.json"
    path.write_text("[" + ",\n  ".join(parts) + "\n]\n")
    items = read(path, chunk=chunk)
    assert len(items) == 1 + 2 * len(BAD_ITEMS)
    assert items[0].value == {"ok": 0}
    for number, (_, words) in enumerate(BAD_ITEMS):
        bad, good = items[1 + 2 * number], items[2 + 2 * number]
        assert bad.value is None and bad.error is not None and words in bad.error, bad
        assert bad.source.endswith(f"dead.json[{1 + 2 * number}]") and not bad.fatal
        assert good.value == tricky and good.error is None


def test_bad_lines_are_refused_each_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "dead.jsonl"
    lines = ['{"ok": 0}'] + [text for text, _ in BAD_ITEMS] + ['{"ok": 1}']
    path.write_bytes("\n".join(lines).encode() + b'\n{"bad": "\xff"}\n')
    items = read(path)
    assert items[0].value == {"ok": 0} and items[-2].value == {"ok": 1}
    for number, (_, words) in enumerate(BAD_ITEMS, start=2):
        item = items[number - 1]
        assert item.source.endswith(f"dead.jsonl:{number}") and words in (item.error or "")
    assert items[-1].error == "not UTF-8 text: invalid start byte at byte 9"


def test_a_first_line_that_is_not_json_does_not_hide_the_others(tmp_path: Path) -> None:
    path = tmp_path / "dead.jsonl"
    path.write_text('{"broken": tru}\n{"ok": 1}\n')
    assert rows(read(path)) == [
        ("dead.jsonl:1", None, "not JSON"),
        ("dead.jsonl:2", {"ok": 1}, None),
    ]


def test_a_first_line_of_bad_bytes_that_opens_nothing_is_one_bad_line(tmp_path: Path) -> None:
    # Found by the hostile replay mixtures: "{" after "#", then a byte that is not UTF-8,
    # was read as the first line of a document spread over lines, and the whole file was
    # refused. Only a line that starts a value can start a document.
    path = tmp_path / "dead.jsonl"
    path.write_bytes(b'#{\x80\n{"ok": 1}\n')
    assert rows(read(path)) == [
        ("dead.jsonl:1", None, "not UTF-8 text"),
        ("dead.jsonl:2", {"ok": 1}, None),
    ]
    # A document's first line, refused for its bytes, still starts the document.
    path.write_bytes(b'{"a": "\x80",\n "b": 1}\n')
    assert [(i.source.rsplit("/", 1)[1], i.value) for i in read(path)] == [("dead.jsonl", None)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # An array whose first item is refused is still an array.
        ("[" + "7" * 4400 + ',\n{"a": 1}]', [("x.json[0]", None), ("x.json[1]", {"a": 1})]),
        # JSON Lines whose first line is an array (refused or not) are still lines.
        ("[" * 100 + "]" * 100 + '\n{"a": 1}\n', [("x.json:1", None), ("x.json:2", {"a": 1})]),
        ('[1, 2]\n{"a": 1}\n', [("x.json:1", [1, 2]), ("x.json:2", {"a": 1})]),
        # One document whose first line holds a refused value is one refused document.
        ('{"n": ' + "7" * 4400 + ',\n "a": 1}\n', [("x.json", None)]),
    ],
)
def test_the_first_line_tells_arrays_lines_and_documents_apart(
    tmp_path: Path, text: str, expected: list[tuple[str, object]]
) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    assert [(i.source.rsplit("/", 1)[1], i.value) for i in read(path)] == expected


def test_bytes_that_are_not_utf8_spoil_only_their_item(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'[{"a": "\xff"}, {"b": 1}]')
    assert rows(read(path)) == [
        ("a.json[0]", None, "not UTF-8 text"),
        ("a.json[1]", {"b": 1}, None),
    ]


def test_an_array_cut_short_ends_with_one_fatal_item_and_the_next_file_is_read(
    tmp_path: Path,
) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text(json.dumps([{"a": 1}, {"b": 2}], indent=2)[:-10])
    after = tmp_path / "after.jsonl"
    after.write_text('{"c": 3}\n')
    items = read(cut, after)
    assert items[0].value == {"a": 1}
    assert items[1].fatal and items[1].source.endswith("cut.json[1]")
    assert (items[1].error or "").startswith("not valid JSON or JSON Lines: ")
    assert items[2].value == {"c": 3} and items[2].index == 2


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[1, 2] [3]", "more text after the array at line 1"),
        ("[1 2]", "expected ',' or ']' after item 0, found '2'"),
        ('[1, "open', "not valid JSON"),
        ('{\n  "a": 1\n}\n{"b": 2}\n', "more text after the document at line 4"),
        ('{\n  "a": 1,\n', "not valid JSON or JSON Lines"),
    ],
)
def test_a_broken_structure_is_fatal_and_named(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    last = read(path)[-1]
    assert last.fatal and words in (last.error or ""), last


def test_an_item_over_the_size_limit_is_skipped_without_being_kept(tmp_path: Path) -> None:
    big = json.dumps({"data": "x" * 5000})
    array = tmp_path / "a.json"
    array.write_text(f'[{{"a": 1}}, {big}, {{"b": 2}}]')
    lines = tmp_path / "b.jsonl"
    lines.write_text(f'{{"a": 1}}\n{big}\n{{"b": 2}}\n')
    array_lines = tmp_path / "c.json"  # one item a line: read as lines up to the big one
    array_lines.write_text(f'[\n{{"a": 1}},\n{big},\n{{"b": 2}}\n]\n')
    for path in (array, lines, array_lines):
        items = read(path, max_item_size=1000, chunk=100)
        assert [i.value for i in items] == [{"a": 1}, None, {"b": 2}]
        assert "over the limit" in (items[1].error or ""), items[1]


@pytest.mark.parametrize("separator", [",\n", ","], ids=["a line each", "all on one line"])
def test_memory_is_bounded_by_the_window_not_the_file(tmp_path: Path, separator: str) -> None:
    # All on one line, the file's first line is the whole file: telling an array from
    # JSON Lines must not decode it.
    entry = {"insertId": "x", "textPayload": "y" * 500, "resource": {"labels": {"a": "b"}}}
    path = tmp_path / "big.json"
    with path.open("w") as out:
        out.write("[")
        out.write(separator.join(json.dumps({**entry, "insertId": str(i)}) for i in range(8000)))
        out.write("]")
    size = path.stat().st_size
    assert size > 4_000_000
    tracemalloc.start()
    try:
        count = sum(1 for _ in files.read([path], chunk=64 * 1024))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 8000
    assert peak < size / 8, f"peak {peak} bytes for a file of {size}"


def test_a_directory_is_read_as_the_cloud_storage_sink_layout(tmp_path: Path) -> None:
    def sink_file(log: str, day: str, start: str, end: str, *entries: str) -> None:
        path = tmp_path / log / day / f"{start}_{end}_S0.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({"id": e}) + "\n" for e in entries))

    sink_file("events", "2026/05/20", "09:00:00", "09:59:59", "events-9")
    sink_file("events", "2026/05/20", "08:00:00", "08:59:59", "events-8a", "events-8b")
    sink_file("cloudaudit.googleapis.com", "2026/05/20", "08:00:00", "08:59:59", "audit-8")
    sink_file("cloudaudit.googleapis.com", "2026/05/19", "23:00:00", "23:59:59", "audit-19")
    (tmp_path / "events" / ".partial").write_text("not read")
    items = read(tmp_path)
    assert [i.value["id"] for i in items] == [
        "audit-19",
        "audit-8",
        "events-8a",
        "events-8b",
        "events-9",
    ]
    assert items[2].source.endswith("events/2026/05/20/08:00:00_08:59:59_S0.json:1")


def test_a_missing_path_is_bad_input_before_anything_is_read(tmp_path: Path) -> None:
    here = tmp_path / "here.jsonl"
    here.write_text("{}\n")
    with pytest.raises(InvalidInput, match="cannot read .*nope.jsonl: no such file"):
        files.expand([here, tmp_path / "nope.jsonl"])


JSON = json_values()


@settings(
    max_examples=150, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(JSON, min_size=0, max_size=8),
    indent=st.sampled_from([None, 0, 2]),
    ascii_only=st.booleans(),
    chunk=st.integers(1, 40),
)
def test_arrays_read_in_any_chunks_give_json_load_s_values(
    tmp_path_factory: pytest.TempPathFactory,
    values: list[object],
    indent: int | None,
    ascii_only: bool,
    chunk: int,
) -> None:
    path = tmp_path_factory.mktemp("arrays") / "a.json"
    path.write_text(json.dumps(values, indent=indent, ensure_ascii=ascii_only), encoding="utf-8")
    items = read(path, chunk=chunk)
    assert [i.value for i in items] == values
    assert [i.error for i in items] == [None] * len(values)


@settings(
    max_examples=100, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=st.lists(JSON, min_size=2, max_size=8))
def test_json_lines_give_json_load_s_values(
    tmp_path_factory: pytest.TempPathFactory, values: list[object]
) -> None:
    path = tmp_path_factory.mktemp("lines") / "a.jsonl"
    path.write_text("".join(json.dumps(v) + "\n" for v in values), encoding="utf-8")
    items = read(path)
    assert [i.value for i in items] == values
    assert [i.source.rsplit(":", 1)[1] for i in items] == [
        str(n) for n in range(1, len(values) + 1)
    ]


@settings(
    max_examples=200, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.binary(max_size=120), chunk=st.integers(1, 16))
def test_any_bytes_are_items_or_refusals_never_an_exception(
    tmp_path_factory: pytest.TempPathFactory, raw: bytes, chunk: int
) -> None:
    path = tmp_path_factory.mktemp("bytes") / "x.json"
    path.write_bytes(raw)
    items = read(path, chunk=chunk)
    assert all((i.error is None) or (i.value is None) for i in items)
    assert all(not i.fatal for i in items[:-1])  # a fatal item is the file's last


# Array layouts as writers produce them; items marked None are written as NaN (refused).
LAYOUTS = {
    "one a line, comma after": lambda texts: "[\n" + ",\n".join(texts) + "\n]\n",
    "one a line, comma before": lambda texts: (
        "[\n" + "\n".join(("," if i else "") + t for i, t in enumerate(texts)) + "\n]"
    ),
    "one a line, spaces": lambda texts: "[ " + " ,\n  ".join(texts) + " ]",
    "two a line": lambda texts: (
        "["
        + "".join(
            t + ("," if i < len(texts) - 1 else "") + ("\n" if i % 2 else "")
            for i, t in enumerate(texts)
        )
        + "]"
    ),
    "all on one line": lambda texts: "[" + ",".join(texts) + "]\n",
}


@settings(
    max_examples=150, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    values=st.lists(JSON | st.none().map(lambda _: NotImplemented), min_size=1, max_size=40),
    layout=st.sampled_from(sorted(LAYOUTS)),
    chunk=st.sampled_from([7, 64, 1 << 20]),
)
def test_array_layouts_give_every_item_in_place(
    tmp_path_factory: pytest.TempPathFactory, values: list[object], layout: str, chunk: int
) -> None:
    # The quick path (items that end their line) and the full one must agree on values,
    # refusals and positions, whatever the layout and wherever a chunk ends.
    texts = ["NaN" if v is NotImplemented else json.dumps(v) for v in values]
    path = tmp_path_factory.mktemp("layouts") / "a.json"
    path.write_text(LAYOUTS[layout](texts), encoding="utf-8")
    items = read(path, chunk=chunk)
    assert [i.value for i in items] == [None if v is NotImplemented else v for v in values]
    assert [i.error is not None for i in items] == [v is NotImplemented for v in values]
    assert [i.source.rsplit("/", 1)[1] for i in items] == [
        f"a.json[{n}]" for n in range(len(values))
    ]
    assert not any(i.fatal for i in items)


def test_a_line_that_is_not_the_item_is_never_taken_for_it(tmp_path: Path) -> None:
    # The first line of a pretty-printed item, an item cut short by its line and a
    # number continued on the next line are left to the full decoder.
    path = tmp_path / "a.json"
    path.write_text('[\n{"a": 1,\n "b": [2,\n 3]},\n{"c": "x"}\n,12\n]')
    assert [i.value for i in read(path)] == [{"a": 1, "b": [2, 3]}, {"c": "x"}, 12]
    broken = tmp_path / "b.json"
    broken.write_text('[\n{"a": 1}\n34,\n{"b": 2}\n]')
    items = read(broken)
    assert items[0].value == {"a": 1}
    assert items[1].fatal and "expected ',' or ']' after item 0, found '3'" in (
        items[1].error or ""
    )


@pytest.mark.parametrize(
    "layout", ["one a line, comma after", "one a line, comma before", "one a line, spaces"]
)
def test_refusals_read_a_line_at_a_time_match_the_general_reader_s(
    tmp_path: Path, layout: str
) -> None:
    # Items one a line are read as lines; the same items all on one line go through the
    # general reader. Values, reasons and positions must not depend on which one did.
    texts = [json.dumps({"ok": 0})] + [text for text, _ in BAD_ITEMS] + ['{"bad": "\\ud800"}']
    texts += ['"]"', "[1, [2]]", "12", '{"x": "a,b]"}']
    by_line, general = tmp_path / "lines.json", tmp_path / "general.json"
    by_line.write_text(LAYOUTS[layout](texts))
    general.write_text(LAYOUTS["all on one line"](texts))
    assert rows(read(by_line)) == [
        (r[0].replace("general", "lines"), r[1], r[2]) for r in rows(read(general))
    ]
    assert [i.error for i in read(by_line)] == [i.error for i in read(general)]


def test_bytes_that_are_not_utf8_on_a_line_of_their_own_spoil_only_their_item(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'[\n{"a": "\xff"},\n{"b": 1}\n]\n')
    assert rows(read(path)) == [
        ("a.json[0]", None, "not UTF-8 text"),
        ("a.json[1]", {"b": 1}, None),
    ]


def test_an_array_that_changes_layout_midway_is_read_whole(tmp_path: Path) -> None:
    # One a line, then an item over several lines and two on a line, then one a line
    # again, with the brackets on the first and last items' lines.
    path = tmp_path / "a.json"
    path.write_text(
        '[{"a": 1},\n{"b": 2},\n{\n  "c": [3,\n 4]\n},\n{"d": 5}, {"e": 6},\n'
        '{"f": 7},\n{"g": NaN},\n{"h": 8}]\n'
    )
    items = read(path)
    assert [i.value for i in items] == [
        {"a": 1},
        {"b": 2},
        {"c": [3, 4]},
        {"d": 5},
        {"e": 6},
        {"f": 7},
        None,
        {"h": 8},
    ]
    assert "NaN" in (items[6].error or "") and not any(i.fatal for i in items)
    assert [i.position for i in items] == list(range(8))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[\n{"a": 1},\n{"b": 2}\n]\n\nxx\n', "more text after the array at line 6"),
        ('[\n{"a": 1},\n{"b": 2}\n] xx\n', "more text after the array at line 4"),
        ('[\n{"a": 1}\n{"b": 2}\n]\n', "expected ',' or ']' after item 0, found '{'"),
        ('[\n{"a": 1},\n{"b": 2}\n', "expected ',' or ']' after item 1, found the end"),
        ('[\n{"a": 1},\n{"b": 2},\n', "not valid JSON or JSON Lines"),
    ],
)
def test_a_structure_that_breaks_after_lines_of_items_is_fatal_where_it_breaks(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    items = read(path)
    read_before = [i.value for i in items[:-1]]
    assert read_before == [{"a": 1}, {"b": 2}][: len(read_before)] and read_before
    assert items[-1].fatal and words in (items[-1].error or ""), items[-1]
    assert sum(i.fatal for i in items) == 1


@pytest.mark.parametrize("text", ["[]", "[\n]\n", " [ ] ", "\ufeff[\n\n]"])
def test_an_empty_array_has_no_items(tmp_path: Path, text: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text, encoding="utf-8")
    assert read(path) == []


@pytest.mark.parametrize("layout", ["one a line, comma after", "one a line, comma before"])
def test_items_one_a_line_are_read_to_the_end_as_lines(layout: str) -> None:
    # The line reader is the fast path for this layout: refusals included, it must not
    # hand the file over to the general reader (which would read the same, slower).
    texts = [json.dumps({"ok": n}) for n in range(3)] + [text for text, _ in BAD_ITEMS]
    lines = files._ArrayLines(io.BytesIO(LAYOUTS[layout](texts).encode()), files.MAX_ITEM_SIZE)
    rows = list(lines.rows())
    assert len(rows) == len(texts) and lines.offset == -1
    assert [r[1] for r in rows] == list(range(len(texts)))


@pytest.mark.parametrize(
    "text",
    ['[\n{"a": 1},\n{"b": 2},\nNaN\n', '[{"a": 1}, {"b": 2}, NaN', '[{"a": 1},{"b": 2},"\\ud800"'],
)
def test_an_array_cut_after_a_refused_item_reads_the_same_in_any_layout(
    tmp_path: Path, text: str
) -> None:
    # The refused item is an item like any other; the missing "]" is the one fatal row.
    path = tmp_path / "x.json"
    path.write_text(text)
    items = read(path)
    assert [i.value for i in items[:2]] == [{"a": 1}, {"b": 2}]
    assert items[2].error is not None and not items[2].fatal and items[2].position == 2
    assert len(items) == 4 and items[3].fatal
    assert "expected ',' or ']' after item 2, found the end of the file" in (items[3].error or "")
