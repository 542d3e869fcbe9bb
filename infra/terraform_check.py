"""Check a Terraform configuration against provider schemas, offline.

``terraform validate`` needs the providers, which cannot be downloaded here. This reads
the configuration with python-hcl2 and a schema per provider (infra/provider_schema.py)
and reports, for every resource and data block:

* a resource or data source type its provider does not have (``provider = google-beta``
  picks that provider's schema, otherwise the type's prefix does);
* an argument or nested block (``dynamic`` ones included) the schema does not have, one
  that is read-only, an argument written as a block or a block as an argument;
* a required argument or block that is missing;
* a reference ``TYPE.NAME...``, ``data.TYPE.NAME...``, ``each.value...`` (for_each over a
  resource) or a ``for`` variable over a resource, whose resource is not declared, that
  skips the index of a counted resource, or whose attribute path the schema does not
  have (``google_cloudfunctions2_function.this["x"].service_config[0].uri``);
* ``var.X``, ``local.X`` and ``module.M.OUTPUT`` references to nothing declared, and a
  module call that misses a required variable or passes an unknown one.

    python infra/terraform_check.py infra/terraform infra/terraform/examples/minimal
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hcl2

sys.path.insert(0, str(Path(__file__).resolve().parent))
import provider_schema  # noqa: E402

#: Arguments and blocks Terraform itself handles in every resource or data block.
META = {
    "count",
    "for_each",
    "provider",
    "depends_on",
    "lifecycle",
    "provisioner",
    "connection",
}
MODULE_META = {"source", "version", "providers", "count", "for_each", "depends_on"}


def _hcl_key(key: object) -> bool:
    """python-hcl2's own keys (__is_block__, __comments__, ...), not Terraform's."""
    return isinstance(key, str) and key.startswith("__") and key.endswith("__")


_REFERENCE = re.compile(
    r"(?<![\w.\"-])(data\.)?([a-z][a-z0-9]*_[a-z0-9_]+)\.([A-Za-z_][\w-]*)"
    r"((?:\[(?:[^\[\]]|\[[^\[\]]*\])*\]|\.[A-Za-z_][\w-]*|\.\*)*)"
)
_SEGMENT = re.compile(r"\[(?:[^\[\]]|\[[^\[\]]*\])*\]|\.([A-Za-z_][\w-]*)|\.\*")
_NAMED = re.compile(r"(?<![\w.\"-])(var|local)\.([A-Za-z_][\w-]*)")
_MODULE = re.compile(r"(?<![\w.\"-])module\.([A-Za-z_][\w-]*)(?:\.([A-Za-z_][\w-]*))?")
_FOR = re.compile(
    r"\bfor\s+(?:\w+\s*,\s*)?(\w+)\s+in\s+(data\.)?([a-z][a-z0-9]*_[a-z0-9_]+)\.([A-Za-z_][\w-]*)\s*:"
)
_WHOLE_RESOURCE = re.compile(r"^\$\{(data\.)?([a-z][a-z0-9]*_[a-z0-9_]+)\.([A-Za-z_][\w-]*)\}$")


def unquote(value: Any) -> Any:
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


@dataclass
class Block:
    """One resource or data block of the configuration."""

    kind: str  # "resource" or "data"
    type: str
    name: str
    body: dict[str, Any]
    file: str

    @property
    def address(self) -> str:
        prefix = "data." if self.kind == "data" else ""
        return f"{prefix}{self.type}.{self.name}"

    @property
    def counted(self) -> bool:
        return "count" in self.body or "for_each" in self.body

    @property
    def provider(self) -> str:
        configured = self.body.get("provider")
        if isinstance(configured, str):
            return str(unquote(configured)).strip("${}").split(".")[0]
        return self.type.split("_", 1)[0]


@dataclass
class Config:
    """A directory of .tf files, parsed."""

    directory: Path
    blocks: dict[tuple[str, str, str], Block] = field(default_factory=dict)
    variables: dict[str, dict[str, Any]] = field(default_factory=dict)
    outputs: dict[str, dict[str, Any]] = field(default_factory=dict)
    locals: dict[str, Any] = field(default_factory=dict)
    modules: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: file name -> its whole parsed document, for reference scanning
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)


def load(directory: Path) -> Config:
    config = Config(directory)
    for path in sorted(directory.glob("*.tf")):
        with open(path) as handle:
            document: dict[str, Any] = hcl2.load(handle)
        config.documents[path.name] = document
        for kind in ("resource", "data"):
            for entry in document.get(kind, []):
                for rtype, named in entry.items():
                    for name, body in named.items():
                        block = Block(kind, unquote(rtype), unquote(name), body, path.name)
                        config.blocks[(kind, block.type, block.name)] = block
        for entry in document.get("variable", []):
            config.variables.update({unquote(k): v for k, v in entry.items()})
        for entry in document.get("output", []):
            config.outputs.update({unquote(k): v for k, v in entry.items()})
        for entry in document.get("locals", []):
            config.locals.update({k: v for k, v in entry.items() if not _hcl_key(k)})
        for entry in document.get("module", []):
            config.modules.update({unquote(k): v for k, v in entry.items()})
    return config


def strings(value: Any) -> Iterator[str]:
    """Every string with an expression in it, anywhere in a parsed value."""
    if isinstance(value, str):
        if "${" in value:
            yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "${" in key:
                yield key
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def _is_block(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, dict) and item.get("__is_block__") for item in value
    )


class Checker:
    """Checks one configuration against one schema per provider."""

    def __init__(self, config: Config, schemas: dict[str, dict[str, Any]]) -> None:
        self.config = config
        self.schemas = schemas
        self.problems: list[str] = []
        self.known_types = {
            t
            for schema in schemas.values()
            for kind in ("resources", "data_sources")
            for t in schema[kind]
        }
        self.prefixes = {t.split("_", 1)[0] for t in self.known_types}

    def fail(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    # --- blocks ---------------------------------------------------------------------

    def schema_of(self, block: Block) -> dict[str, Any] | None:
        schema = self.schemas.get(block.provider)
        if schema is None:
            self.fail(block.address, f"no schema for provider {block.provider!r}")
            return None
        kind = "resources" if block.kind == "resource" else "data_sources"
        found: dict[str, Any] | None = schema[kind].get(block.type)
        if found is None:
            label = "resource" if block.kind == "resource" else "data source"
            self.fail(
                f"{block.file}: {block.address}",
                f"{block.provider} {schema['version']} has no {label} type {block.type}",
            )
        return found

    def check_blocks(self) -> None:
        for block in self.config.blocks.values():
            schema = self.schema_of(block)
            if schema is not None:
                where = f"{block.file}: {block.address}"
                self.check_body(where, block.body, schema, top=True)

    def check_body(
        self, where: str, body: dict[str, Any], schema: dict[str, Any], *, top: bool = False
    ) -> None:
        attributes: dict[str, Any] = schema["attributes"]
        blocks: dict[str, Any] = schema["blocks"]
        present: set[str] = set()
        for key, value in body.items():
            if _hcl_key(key) or (top and key in META):
                continue
            if key == "dynamic":
                for entry in value:
                    for label, spec in entry.items():
                        if _hcl_key(label):
                            continue
                        name = unquote(label)
                        present.add(name)
                        if name not in blocks:
                            self.fail(where, f"dynamic {name!r}: no such block")
                            continue
                        for content in spec.get("content", []):
                            self.check_body(f"{where}.{name}", content, blocks[name]["block"])
                continue
            present.add(key)
            if _is_block(value):
                if key in blocks:
                    for item in value:
                        self.check_body(f"{where}.{key}", item, blocks[key]["block"])
                elif key in attributes:
                    self.fail(where, f"{key} is an argument, not a block: write {key} = ...")
                else:
                    self.fail(where, f"no block or argument named {key!r}")
                continue
            if key in attributes:
                if attributes[key]["computed"]:
                    self.fail(where, f"{key} is read-only (computed)")
            elif key in blocks:
                self.fail(where, f"{key} is a block, not an argument: write {key} {{ ... }}")
            else:
                self.fail(where, f"no argument named {key!r}")
        for name, spec in attributes.items():
            if spec["required"] and name not in present:
                self.fail(where, f"the required argument {name!r} is missing")
        for name, spec in blocks.items():
            if spec["required"] and name not in present:
                self.fail(where, f"the required block {name!r} is missing")

    # --- references -----------------------------------------------------------------

    def resolve(self, data: bool, rtype: str) -> dict[str, Any] | None:
        """The schema of a referenced type, by the provider its declaration uses."""
        kind = "data" if data else "resource"
        declared = [b for k, b in self.config.blocks.items() if k[0] == kind and k[1] == rtype]
        provider = declared[0].provider if declared else rtype.split("_", 1)[0]
        schema = self.schemas.get(provider)
        if schema is None:
            return None
        found: dict[str, Any] | None = schema["data_sources" if data else "resources"].get(rtype)
        return found

    def check_path(self, where: str, label: str, schema: dict[str, Any], path: str) -> None:
        current: dict[str, Any] | None = schema
        trail = label
        for segment in _SEGMENT.finditer(path):
            name = segment.group(1)
            if name is None or current is None:
                trail += segment.group(0)
                continue
            trail += f".{name}"
            if name in current["blocks"]:
                current = current["blocks"][name]["block"]
            elif name in current["attributes"]:
                current = current["attributes"][name].get("nested")
                if current is None:
                    return  # a primitive, list or map: what follows indexes into it
            elif current.get("recursive"):
                return
            else:
                self.fail(where, f"{trail}: no such attribute")
                return

    def check_reference(self, where: str, match: re.Match[str]) -> None:
        data, rtype, name, path = (
            bool(match.group(1)),
            match.group(2),
            match.group(3),
            match.group(4),
        )
        if rtype not in self.known_types and rtype.split("_", 1)[0] not in self.prefixes:
            return  # a function or a for variable, not a resource
        address = f"{'data.' if data else ''}{rtype}.{name}"
        block = self.config.blocks.get(("data" if data else "resource", rtype, name))
        if block is None:
            self.fail(where, f"{address} is not declared")
            return
        if block.counted and path.startswith(".") and not path.startswith(".*"):
            self.fail(where, f"{address}{path}: {address} has count or for_each, index it")
            return
        schema = self.resolve(data, rtype)
        if schema is not None:
            self.check_path(where, address, schema, path)

    def check_bound(self, where: str, text: str, variable: str, schema: dict[str, Any]) -> None:
        pattern = re.compile(
            rf"(?<![\w.\"-]){re.escape(variable)}"
            r"((?:\[(?:[^\[\]]|\[[^\[\]]*\])*\]|\.[A-Za-z_][\w-]*)+)"
        )
        for found in pattern.finditer(text):
            self.check_path(where, variable, schema, found.group(1))

    def check_references(self, module: Config | None = None) -> None:
        for file, document in self.config.documents.items():
            for section, entries in document.items():
                for entry in entries if isinstance(entries, list) else [entries]:
                    for label, body in entry.items() if isinstance(entry, dict) else []:
                        self.check_section(file, section, label, body, module)

    def check_section(
        self, file: str, section: str, label: str, body: Any, module: Config | None
    ) -> None:
        if section in ("resource", "data") and isinstance(body, dict):
            prefix = "data." if section == "data" else ""
            for name, inner in body.items():
                where = f"{file}: {prefix}{unquote(label)}.{unquote(name)}"
                self.check_section_body(where, inner, module)
            return
        self.check_section_body(f"{file}: {section} {unquote(label)}", body, module)

    def check_section_body(self, where: str, body: Any, module: Config | None) -> None:
        # for_each over a whole resource binds each.value to one of its instances.
        each: dict[str, Any] | None = None
        if isinstance(body, dict) and isinstance(body.get("for_each"), str):
            whole = _WHOLE_RESOURCE.match(body["for_each"])
            if whole:
                each = self.resolve(bool(whole.group(1)), whole.group(2))
        for text in strings(body):
            for match in _REFERENCE.finditer(text):
                self.check_reference(where, match)
            for found in _FOR.finditer(text):
                schema = self.resolve(bool(found.group(2)), found.group(3))
                if schema is not None:
                    self.check_bound(where, text, found.group(1), schema)
            if each is not None:
                self.check_bound(where, text, "each.value", each)
            for kind, name in _NAMED.findall(text):
                if kind == "var" and name not in self.config.variables:
                    self.fail(where, f"var.{name} is not declared")
                if kind == "local" and name not in self.config.locals:
                    self.fail(where, f"local.{name} is not declared")
            for name, output in _MODULE.findall(text):
                if name not in self.config.modules:
                    self.fail(where, f"module.{name} is not declared")
                elif module is not None and output and output not in module.outputs:
                    self.fail(where, f"module.{name}.{output}: the module has no such output")

    # --- module calls -----------------------------------------------------------------

    def check_module_calls(self, module: Config) -> None:
        for name, call in self.config.modules.items():
            given = {k for k in call if not _hcl_key(k) and k not in MODULE_META}
            for argument in sorted(given - set(module.variables)):
                self.fail(f"module {name}", f"{argument!r} is not a variable of the module")
            for variable, spec in module.variables.items():
                if "default" not in spec and variable not in given:
                    self.fail(f"module {name}", f"the required variable {variable!r} is missing")


def check(
    directory: Path, schemas: dict[str, dict[str, Any]], module: Path | None = None
) -> list[str]:
    """Every problem of the configuration in ``directory`` (and its call of ``module``)."""
    return check_config(load(directory), schemas, load(module) if module is not None else None)


def check_config(
    config: Config, schemas: dict[str, dict[str, Any]], called: Config | None = None
) -> list[str]:
    """Every problem of a loaded configuration (and its call of the ``called`` module)."""
    checker = Checker(config, schemas)
    checker.check_blocks()
    checker.check_references(called)
    if called is not None:
        checker.check_module_calls(called)
    return checker.problems


def schema_sets(directory: Path = provider_schema.DEFAULT_DIR) -> dict[str, dict[str, Any]]:
    """ "oldest" and "newest": one schema per provider, from the pinned versions."""
    by_provider: dict[str, list[provider_schema.Pin]] = {}
    for pin in provider_schema.PINS:
        by_provider.setdefault(pin.provider, []).append(pin)
    sets: dict[str, dict[str, Any]] = {"oldest": {}, "newest": {}}
    for provider, pins in by_provider.items():
        ordered = sorted(pins, key=lambda p: tuple(int(x) for x in p.version.split(".")))
        sets["oldest"][provider] = provider_schema.load(provider, ordered[0].version, directory)
        sets["newest"][provider] = provider_schema.load(provider, ordered[-1].version, directory)
    return sets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("module", type=Path, help="the module directory")
    parser.add_argument("callers", type=Path, nargs="*", help="root modules that call it")
    parser.add_argument("--schemas", type=Path, default=provider_schema.DEFAULT_DIR)
    args = parser.parse_args(argv)
    failed = False
    for label, schemas in schema_sets(args.schemas).items():
        versions = ", ".join(f"{p} {s['version']}" for p, s in sorted(schemas.items()))
        for directory in [args.module, *args.callers]:
            module = args.module if directory != args.module else None
            problems = check(directory, schemas, module)
            failed = failed or bool(problems)
            print(f"{directory} against {label} ({versions}): {len(problems)} problem(s)")
            for problem in problems:
                print(f"  {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
