"""README.md and docs/ state contracts; these checks keep them in step with the code.

Every ``loopbreaker`` command and flag shown is checked against the real argparse parser,
every ``make`` target against the Makefile, every ``python -m`` module against the
package, and every relative link (and ``#anchor`` into Markdown) against the tree. The
checker runs on planted mistakes too, so a check that silently stops working fails.

A bare flag in inline code (`--format json`) belongs to the command of its section when
the heading names one (`` ## `loopbreaker replay` ``) and must exist there. Elsewhere it
is checked only when loopbreaker has a flag of that name (its value must then be a valid
choice): prose may name other tools' flags (`--reuse-values` of helm).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest
import test_architecture

from loopbreaker.cli.main import build_parser, main
from loopbreaker.diagnosis.queries import STEP_TITLES
from loopbreaker.model import RemediationPath, RootCause, SignalKind
from loopbreaker.settings.load import VARIABLES, markdown_table

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PARSER = build_parser()


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


# --- Markdown, just enough of it ------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_LINK_DEFINITION = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
_HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


@dataclass(frozen=True)
class Code:
    line: int
    text: str
    block: bool
    #: The command a section is about (`loopbreaker incidents`), for bare flags in it.
    scope: tuple[str, ...] | None


@dataclass
class Markdown:
    code: list[Code]
    #: (line number, the line with code blanked out): where links are looked for.
    prose: list[tuple[int, str]]
    headings: list[str]


def parse(text: str) -> Markdown:
    doc = Markdown([], [], [])
    fence: str | None = None
    block: list[str] = []
    start = 0
    scope: tuple[str, ...] | None = None
    scope_level = 0
    for number, line in enumerate(text.splitlines(), start=1):
        opened = _FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1) == fence:
                doc.code.append(Code(start, "\n".join(block), True, scope))
                fence = None
            else:
                block.append(line)
            continue
        if opened:
            fence, block, start = opened.group(1), [], number + 1
            continue
        heading = _HEADING.match(line)
        if heading:
            level, title = len(heading.group(1)), heading.group(2)
            doc.headings.append(title)
            named = [c.group(2).split() for c in _INLINE_CODE.finditer(title)]
            command = next((c for c in named if c and c[0] == "loopbreaker"), None)
            if command is not None:
                scope, scope_level = tuple(command), level
            elif scope is not None and level <= scope_level:
                scope = None
        for span in _INLINE_CODE.finditer(line):
            doc.code.append(Code(number, span.group(2), False, scope))
        doc.prose.append((number, _INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)))
    return doc


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    found = set(_HTML_ANCHOR.findall(text))
    for heading in parse(text).headings:
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


# --- commands shown in code -----------------------------------------------------------


def commands(code: str) -> Iterator[list[str]]:
    """The shell commands in a snippet, as token lists (prompts, comments, pipes split off)."""
    code = code.replace("\\|", "|").replace("\\\n", " ")
    for line in code.splitlines():
        line = line.strip().removeprefix("$ ")
        for part in re.split(r"\s+\|\s+|\s*&&\s*|\s*;\s+", line):
            part = re.split(r"(?:^|\s)#", part, maxsplit=1)[0]
            try:
                tokens = shlex.split(part)
            except ValueError:
                tokens = part.split()
            if tokens:
                yield tokens


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def every_option(parser: argparse.ArgumentParser) -> dict[str, list[argparse.Action]]:
    """The options of a parser and of all its subcommands (one flag, several actions)."""
    found = {flag: [action] for flag, action in parser._option_string_actions.items()}
    for child in subcommands(parser).values():
        for flag, actions in every_option(child).items():
            found.setdefault(flag, []).extend(actions)
    return found


def _placeholder(value: str) -> bool:
    return bool(re.fullmatch(r"[A-Z][A-Z0-9_:]*(\.\.\.|…)?", value)) or any(
        c in value for c in "<{…"
    )


def check_loopbreaker(
    tokens: list[str], *, section: bool = False, known_only: bool = False
) -> list[str]:
    """What is wrong with ``loopbreaker ...``: unknown subcommands, flags, choices.

    ``section``: bare flags under a command's heading; they may belong to any of its
    subcommands (``--state`` under ``loopbreaker incidents``). ``known_only``: a flag
    loopbreaker does not have is another tool's, not a mistake.
    """
    parser, path, rest = PARSER, ["loopbreaker"], tokens[1:]
    while rest and subcommands(parser):
        word = rest[0].strip("[]()")
        if word.startswith("-") or _placeholder(word) or word in ("...", "…"):
            break
        names = subcommands(parser)
        unknown = [w for w in word.split("|") if w not in names]
        if unknown:
            return [f"`{' '.join(path)} {word}`: no subcommand {unknown} (has {sorted(names)})"]
        parser, path, rest = names[word.split("|")[0]], [*path, word], rest[1:]
    options = (
        every_option(parser)
        if section
        else {flag: [action] for flag, action in parser._option_string_actions.items()}
    )
    problems = []
    for index, token in enumerate(rest):
        for piece in token.strip("[]()").split("|"):
            if not piece.startswith("-") or piece in ("-", "--"):
                continue
            flag, _, value = piece.rstrip(".,]").partition("=")
            actions = options.get(flag)
            if not actions:
                if not known_only:
                    problems.append(f"`{' '.join(path)}` has no flag {flag}")
                continue
            if not value and index + 1 < len(rest) and actions[0].nargs != 0:
                value = rest[index + 1].strip("[]()").rstrip(".,")
            if not value or value.startswith("-") or _placeholder(value):
                continue
            for choice in value.split("|"):
                allowed = [a.choices for a in actions]
                if None not in allowed and not any(choice in c for c in allowed if c):
                    merged = sorted({str(c) for choices in allowed if choices for c in choices})
                    problems.append(f"`{' '.join(path)} {flag} {choice}`: not one of {merged}")
    return problems


def make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", read(ROOT / "Makefile"), re.M))


def check_module(name: str) -> list[str]:
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:  # a parent package is missing
        spec = None
    if spec is None:
        return [f"`python -m {name}`: no such loopbreaker module"]
    if spec.submodule_search_locations is not None:
        if importlib.util.find_spec(f"{name}.__main__") is None:
            return [f"`python -m {name}`: the package has no __main__"]
    elif spec.origin and "__main__" not in Path(spec.origin).read_text(encoding="utf-8"):
        return [f"`python -m {name}`: the module does nothing when run"]
    return []


def check_code(code: Code) -> list[str]:
    problems = []
    for tokens in commands(code.text):
        program = tokens[0].rsplit("/", 1)[-1]
        if tokens[0] == "loopbreaker" or tokens[0].endswith("bin/loopbreaker"):
            problems += check_loopbreaker(tokens)
        elif program == "make":
            targets = [t for t in tokens[1:] if not t.startswith("-") and "=" not in t]
            problems += [f"`make {t}`: no such target" for t in targets if t not in make_targets()]
        elif re.fullmatch(r"python3?(\.\d+)?", program):
            module = tokens[tokens.index("-m") + 1] if "-m" in tokens[1:-1] else None
            if module is not None:
                # Other modules (pytest, venv) are not ours to check.
                problems += check_module(module) if module.startswith("loopbreaker") else []
            elif len(tokens) > 1 and tokens[1].endswith(".py") and not (ROOT / tokens[1]).is_file():
                problems.append(f"`{' '.join(tokens[:2])}`: no such file")
        elif not code.block and re.match(r"--?[A-Za-z]", program):
            # A bare flag: of the section's command; elsewhere maybe another tool's.
            scope = code.scope or ("loopbreaker",)
            problems += check_loopbreaker(
                [*scope, *tokens], section=True, known_only=code.scope is None
            )
    return problems


# --- links ----------------------------------------------------------------------------


def link_targets(doc: Markdown) -> Iterator[tuple[int, str]]:
    for number, line in doc.prose:
        for match in _LINK.finditer(line):
            yield number, match.group(1)
        definition = _LINK_DEFINITION.match(line)
        if definition:
            yield number, definition.group(1)


def check_link(path: Path, text: str, target: str) -> str | None:
    if re.match(r"^[a-z][a-z0-9+.-]*:|^//", target, re.I):
        return None  # another site: not checked offline
    file_part, _, anchor = target.partition("#")
    if file_part:
        resolved = (path.parent / unquote(file_part)).resolve()
        if not resolved.is_relative_to(ROOT):
            return f"{target}: leaves the repository"
        if not resolved.exists():
            return f"{target}: no such file or directory"
        if not anchor or resolved.suffix != ".md":
            return None
        text = read(resolved)
    if anchor and unquote(anchor) not in anchors(text):
        return f"{target}: no heading #{anchor}"
    return None


def problems_in(path: Path, text: str) -> list[str]:
    """Everything wrong in one Markdown file, as ``file:line: what``."""
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    doc = parse(text)
    found = [f"{where}:{code.line}: {p}" for code in doc.code for p in check_code(code)]
    for number, target in link_targets(doc):
        problem = check_link(path, text, target)
        if problem:
            found.append(f"{where}:{number}: {problem}")
    return found


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_commands_flags_targets_modules_and_links_are_valid(path: Path) -> None:
    assert problems_in(path, read(path)) == []


PLANTED = DOCS / "planted.md"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("See [the CLI](cli.md#no-such-heading).", "no heading #no-such-heading"),
        ("See [it](no-such-file.md).", "no such file"),
        ("See [above](#missing).\n\n## Present\n", "no heading #missing"),
        ("See [out](../../../etc/passwd).", "leaves the repository"),
        ("Run `loopbreaker diagnose --no-such-flag`.", "has no flag --no-such-flag"),
        ("```sh\nloopbreaker diagnose \\\n    --format yaml\n```", "not one of"),
        ("Run `loopbreaker frobnicate`.", "no subcommand"),
        ("Run `loopbreaker incidents list --frob`.", "no flag --frob"),
        ("## `loopbreaker replay`\n\nUse `--state open`.", "no flag --state"),
        ("## `loopbreaker diagnose`\n\n`--no-such-option`", "no flag --no-such-option"),
        ("Use `--workload-kind kubeflow`.", "not one of"),
        ("```sh\nmake demo && make no-such-target\n```", "`make no-such-target`"),
        ("Run `python -m loopbreaker.no_such_module`.", "no such loopbreaker module"),
        ("Run `python -m loopbreaker.timeutil`.", "does nothing when run"),
        ("Run `python -m loopbreaker.nowhere.deeper`.", "no such loopbreaker module"),
    ],
)
def test_a_planted_mistake_is_caught(text: str, expected: str) -> None:
    found = problems_in(PLANTED, text)
    assert len(found) == 1 and expected in found[0], found


def test_valid_commands_and_links_pass() -> None:
    text = (
        "## `loopbreaker incidents`\n\nUse `--state awaiting_approval` or `--store S`.\n\n"
        "```sh\n$ loopbreaker diagnose --cluster C --workload W --issue-time T \\\n"
        "    [--workload-kind jobset|tfjob|pytorchjob] [--format text|json|markdown]\n"
        "loopbreaker remediate ID [--dry-run|--no-dry-run] --format=json | jq .\n"
        "make demo   # comment\npython -m loopbreaker.settings.load\n"
        ".venv/bin/python -m pytest -q tests/test_docs.py\n```\n"
        "See [the CLI](cli.md#loopbreaker-diagnose), [code](../shared/loopbreaker/cli/main.py),"
        " [up](#loopbreaker-incidents) and [a site](https://example.com/x#y).\n"
    )
    assert problems_in(PLANTED, text) == []


# --- the front door -------------------------------------------------------------------


def test_readme_is_a_short_front_door_in_the_issues_order() -> None:
    text = read(README)
    assert len(text.splitlines()) <= 200
    headings = [h for h in parse(text).headings if not h.startswith("loopbreaker")]
    order = ["Try it", "Deploy it", "How it decides", "Documentation"]
    positions = [next(i for i, h in enumerate(headings) if h.startswith(o)) for o in order]
    assert positions == sorted(positions), headings


def test_quick_start_is_the_two_commands() -> None:
    quick = read(README).split("## Try it", 1)[1].split("```", 2)[1]
    commands_ = [line.split("#")[0].strip() for line in quick.splitlines()[1:] if line.strip()]
    assert commands_ == ["make demo", "make test"]


def test_every_doc_is_linked_from_the_readme() -> None:
    linked = {target for _, target in link_targets(parse(read(README)))}
    for path in sorted(DOCS.glob("*.md")):
        assert f"docs/{path.name}" in linked, f"README.md does not link docs/{path.name}"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 0
    return capsys.readouterr().out


def test_transcripts_match_real_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shown ``$ loopbreaker diagnose ... --telemetry`` and its output lines are real."""
    monkeypatch.chdir(ROOT)
    shown = 0
    for path in doc_files():
        for code in parse(read(path)).code:
            lines = [line.strip() for line in code.text.splitlines() if line.strip()]
            if not (code.block and lines and lines[0].startswith("$ loopbreaker diagnose")):
                continue
            real = [line.strip() for line in _run(shlex.split(lines[0])[2:], capsys).splitlines()]
            at = 0
            for line in lines[1:]:
                assert line in real[at:], f"{path.name}:{code.line}: not in the output: {line}"
                at = real.index(line, at) + 1
            shown += 1
    assert shown >= 1


# --- reference tables match the code --------------------------------------------------


def test_settings_table_matches_the_settings_module() -> None:
    assert markdown_table().strip() in read(DOCS / "configuration.md")


def test_every_variable_named_in_the_docs_exists() -> None:
    source = "".join(read(p) for p in (ROOT / "shared" / "loopbreaker").rglob("*.py"))
    known = {v.name for v in VARIABLES} | set(re.findall(r"\"(LOOPBREAKER_[A-Z0-9_]+)\"", source))
    for path in doc_files():
        for name in re.findall(r"LOOPBREAKER_[A-Z0-9_]*[A-Z0-9](?![\w*<])", read(path)):
            # A secret's <NAME>_SECRET_NAME and <NAME>_FILE forms are documented once.
            base = name.removesuffix("_SECRET_NAME").removesuffix("_FILE")
            assert name in known or base in known, (path, name)


def test_every_root_cause_path_and_signal_kind_is_documented() -> None:
    diagnosis = read(DOCS / "diagnosis.md")
    for name in [*RootCause, *RemediationPath, *SignalKind]:
        assert f"`{name.value}`" in diagnosis, name
    for cause in RootCause:
        assert f"`{cause.value}`" in read(README), cause


def _diagnosis_json_example() -> dict[str, object]:
    section = read(DOCS / "diagnosis.md").split("## JSON output", 1)[1]
    example: dict[str, object] = json.loads(section.split("```json", 1)[1].split("```", 1)[0])
    return example


def _shape(doc: object, real: object, where: str = "$") -> list[str]:
    """Keys shown in the docs that the real output lacks, or the other way round."""
    if isinstance(doc, dict) and isinstance(real, dict):
        found = [] if set(doc) == set(real) else [f"{where}: {sorted(doc)} != {sorted(real)}"]
        return found + [p for k in doc.keys() & real.keys() for p in _shape(doc[k], real[k], k)]
    if isinstance(doc, list) and isinstance(real, list) and real:
        return [p for item in doc if item != "…" for p in _shape(item, real[0], f"{where}[]")]
    return []


def test_the_json_example_is_real_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    example = _diagnosis_json_example()
    context = example["context"]
    assert isinstance(context, dict)
    argv = ["diagnose", "--telemetry", "examples/telemetry/faulty-host", "--format", "json"]
    for key in ("project", "location", "cluster", "namespace", "workload", "workload_kind"):
        argv += [f"--{key.replace('_', '-')}", context[key]]
    argv += ["--issue-time", context["issue_time"]]
    monkeypatch.chdir(ROOT)
    real = json.loads(_run(argv, capsys))
    assert _shape(example, real) == []
    for key in ("root_cause", "restart_loop", "restart_increase", "queries_run"):
        assert example[key] == real[key], key
    steps = example["steps"]
    assert isinstance(steps, list)
    titles = {s["number"]: s["title"] for s in steps}
    assert titles == {s["number"]: s["title"] for s in real["steps"]} == dict(STEP_TITLES)


def test_the_step_table_uses_the_real_step_titles() -> None:
    rows = re.findall(r"^\| (\d)\. ([^|]+?) \|", read(DOCS / "diagnosis.md"), re.M)
    assert {int(n): title for n, title in rows} == dict(STEP_TITLES)


def _table(text: str, header: str) -> list[list[str]]:
    lines = text.split(header, 1)[1].splitlines()[2:]
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_import_tables_are_the_ones_the_architecture_test_enforces() -> None:
    text = read(DOCS / "architecture.md")
    vocabulary = test_architecture.VOCABULARY
    may_import = {}
    for unit, allowed in _table(text, "| Package | May import |"):
        name = re.findall(r"`?(\w+)`?", unit)[0]
        may_import[name] = frozenset(
            vocabulary if n == "vocabulary" else n for n in re.findall(r"`?(\w+)`?", allowed)
        ) - {"nothing", "of", "loopbreaker"}
    assert may_import == test_architecture.MAY_IMPORT
    rules = {"any": "ANY", "only": "LAZY", "none": "NONE"}
    may_use = {}
    for modules, rule in _table(text, "| Modules | Third-party imports |"):
        names = re.findall(r"`([\w.]+)`", modules) or [""]
        for name in names:
            may_use[name] = test_architecture.Sdk[rules[rule.split()[0].rstrip(":")]]
    assert may_use == test_architecture.MAY_USE_SDK


def test_every_package_has_a_place_in_the_architecture_doc() -> None:
    text = read(DOCS / "architecture.md")
    package = ROOT / "shared" / "loopbreaker"
    for unit in sorted(p.name for p in package.iterdir() if (p / "__init__.py").exists()):
        assert f"`{unit}/`" in text, unit


def test_the_signals_page_lists_the_catalog_as_it_is() -> None:
    from loopbreaker.signals import catalog
    from loopbreaker.signals.catalog import docs

    on_disk = (ROOT / docs.DOC_FILE).read_text(encoding="utf-8")
    expected = docs.markdown(catalog.load())
    assert on_disk == expected, (
        "run: python -m loopbreaker.signals.catalog --markdown > docs/signals.md"
    )
