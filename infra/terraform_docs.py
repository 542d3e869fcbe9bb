"""The Requirements, Inputs and Outputs tables of a module README, from its .tf files.

terraform-docs style: the tables between ``<!-- BEGIN_TF_DOCS -->`` and
``<!-- END_TF_DOCS -->`` are generated from ``versions.tf``, ``variables.tf`` and
``outputs.tf`` (python-hcl2, no terraform-docs binary needed), so they cannot drift:

    python infra/terraform_docs.py            # rewrite infra/terraform/README.md
    python infra/terraform_docs.py --check    # exit 1 when the README is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import hcl2

MODULE = Path(__file__).resolve().parent / "terraform"
BEGIN = "<!-- BEGIN_TF_DOCS -->"
END = "<!-- END_TF_DOCS -->"


def _unquote(value: Any) -> Any:
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _expression(value: str) -> str:
    return value[2:-1] if value.startswith("${") and value.endswith("}") else value


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _value(value: Any) -> str:
    """A default as HCL would write it (python-hcl2 keeps string literals quoted)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return _expression(value) if value.startswith("${") else value
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        items = [f"{_unquote(k)} = {_value(v)}" for k, v in value.items() if not k.startswith("__")]
        return "{" + ", ".join(items) + "}"
    raise TypeError(f"cannot render default {value!r}")


def _load(path: Path) -> dict[str, Any]:
    with open(path) as handle:
        parsed: dict[str, Any] = hcl2.load(handle)
    return parsed


def _named(document: dict[str, Any], section: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (_unquote(name), body)
        for entry in document.get(section, [])
        for name, body in entry.items()
    ]


def render(module: Path = MODULE) -> str:
    """The generated block, markers included."""
    versions = _load(module / "versions.tf")
    terraform = versions["terraform"][0]
    lines = [BEGIN, "## Requirements", "", "| Name | Version |", "|------|---------|"]
    lines.append(f"| terraform | `{_unquote(terraform['required_version'])}` |")
    for block in terraform.get("required_providers", []):
        for name, spec in block.items():
            if name.startswith("__"):
                continue
            lines.append(f"| {name} | `{_unquote(spec['version'])}` |")

    lines += [
        "",
        "### Inputs",
        "",
        "| Name | Description | Type | Default | Required |",
        "|------|-------------|------|---------|:--------:|",
    ]
    for name, spec in sorted(_named(_load(module / "variables.tf"), "variable")):
        description = _cell(_unquote(spec.get("description", "")))
        if spec.get("sensitive") is True:
            description += " Sensitive."
        kind = _expression(spec.get("type", "${any}"))
        required = "default" not in spec
        default = "n/a" if required else f"`{_value(spec['default'])}`"
        lines.append(
            f"| `{name}` | {description} | `{kind}` | {default} | {'yes' if required else 'no'} |"
        )

    lines += ["", "### Outputs", "", "| Name | Description |", "|------|-------------|"]
    for name, spec in sorted(_named(_load(module / "outputs.tf"), "output")):
        lines.append(f"| `{name}` | {_cell(_unquote(spec.get('description', '')))} |")
    lines += ["", END]
    return "\n".join(lines)


def update(readme: str, block: str) -> str:
    """``readme`` with the text between the markers replaced by ``block``."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the README has no {BEGIN} ... {END} markers")
    return readme[:start] + block + readme[end + len(END) :]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("module", type=Path, nargs="?", default=MODULE)
    parser.add_argument("--check", action="store_true", help="fail when the README differs")
    args = parser.parse_args(argv)
    path = args.module / "README.md"
    current = path.read_text()
    wanted = update(current, render(args.module))
    if args.check:
        if wanted != current:
            print(
                f"{path}: the generated tables are out of date; run "
                "`python infra/terraform_docs.py`",
                file=sys.stderr,
            )
            return 1
        return 0
    if wanted != current:
        path.write_text(wanted)
        print(f"{path}: tables updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
