"""Terraform provider schemas for the offline checks, taken from prebuilt CDK bindings.

The providers cannot be downloaded here, so ``terraform validate`` cannot run. The
prebuilt CDK for Terraform bindings are generated from each provider's schema and are
published to npm (``@cdktf/provider-*``: google and google-beta up to 6.50, archive,
time) and PyPI (``cdktn-provider-*``: google and google-beta 7.x and 8.x). The npm
tarball is the cheapest source (about 25 MB for google); for 7.x/8.x only the wheel
exists, which carries the same tarball in ``_jsii/``. Each package ships its jsii assembly
(``package/.jsii``) and the generated JavaScript (``package/lib/*/index.js``):

* the assembly names every resource and data source class, its config struct, each
  argument (``optional`` or not: a required argument is not optional) and each nested
  block (documented as ``"<name> block."``), with the Terraform name in the link of
  its docs (``.../docs/resources/pubsub_subscription#dead_letter_policy``);
* the JavaScript gives the Terraform name of every attribute a class can read
  (``get uri() { return this.getStringAttribute('uri'); }`` and
  ``new ...OutputReference(this, "service_config")``), computed ones included.

``install DIR`` downloads each pinned package with npm or pip (checked against its
SHA-256), reads it as a stream and writes ``DIR/<provider>-<version>.json``:

    {"provider": ..., "version": ..., "resources": {TYPE: BLOCK}, "data_sources": {...}}
    BLOCK = {"attributes": {NAME: {"required", "optional", "computed", "nested"?}},
             "blocks": {NAME: {"required": bool, "block": BLOCK}}}

``computed`` marks an attribute that can only be read; ``nested`` is the BLOCK of a
computed object or list of objects (``status[0].url``). Downloads are not kept.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / ".provider-schema"


@dataclass(frozen=True)
class Pin:
    """One provider version's schema: the binding package that carries it."""

    provider: str
    version: str
    registry: str  # "npm" or "pypi"
    package: str
    package_version: str
    sha256: str

    @property
    def filename(self) -> str:
        return f"{self.provider}-{self.version}.json"


#: For each provider of infra/terraform/versions.tf, the oldest version its constraint
#: admits and the newest one published (a test checks both against the constraints).
PINS = (
    Pin(
        "google",
        "6.1.0",
        "npm",
        "@cdktf/provider-google",
        "14.0.0",
        "bfbbb6cc619a86a4886b0f1d7c70c991e86557bb85e787a8afbc090d4b37db1a",
    ),
    Pin(
        "google",
        "8.7.0",
        "pypi",
        "cdktn-provider-google",
        "21.1.0",
        "157dead5025d5db5abe48e40cc49f0b6a4d8088fd0498eb17ad5a36bca811b2a",
    ),
    Pin(
        "google-beta",
        "6.1.0",
        "npm",
        "@cdktf/provider-google-beta",
        "14.0.0",
        "3732d48758a41bcc25b140b495b53c61e55e4544f9d89f29998851a585894c68",
    ),
    Pin(
        "google-beta",
        "8.7.0",
        "pypi",
        "cdktn-provider-google-beta",
        "21.1.0",
        "335670a6abb9f779ee113bc07c9402e12431aa877444039080d224599a436e84",
    ),
    Pin(
        "archive",
        "2.4.1",
        "npm",
        "@cdktf/provider-archive",
        "10.0.0",
        "917610b0d441062d28c17f8a37980f31646065b66bab9c0cfafceaee20bd16c9",
    ),
    Pin(
        "archive",
        "2.7.1",
        "npm",
        "@cdktf/provider-archive",
        "11.0.1",
        "4c4ab18fe1942007579ee9bb3a4895d2823ef9588b8a036ab57a5b2fbac9415e",
    ),
    Pin(
        "time",
        "0.9.1",
        "npm",
        "@cdktf/provider-time",
        "9.0.0",
        "7e38d4936e0992b7206a9fca2df41eb5724e93ed1fd944790d509e8ef98910b2",
    ),
    Pin(
        "time",
        "0.13.1",
        "npm",
        "@cdktf/provider-time",
        "11.0.1",
        "02823a43574e8c6d872a53fb7a995bdef474b5ff904adadc29e4f76ecd084418",
    ),
)


class SchemaError(Exception):
    """A package could not be fetched or does not hold what is expected."""


# --- fetching ------------------------------------------------------------------------------


def fetch(pin: Pin, workdir: Path) -> Path:
    """Download the pinned package into ``workdir``; its path, SHA-256 checked."""
    if pin.registry == "npm":
        spec = f"{pin.package}@{pin.package_version}"
        result = subprocess.run(
            ["npm", "pack", spec, "--pack-destination", str(workdir), "--silent"],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise SchemaError(f"npm pack {spec} failed: {result.stderr.strip()[-500:]}")
        files = list(workdir.glob("*.tgz"))
    elif pin.registry == "pypi":
        spec = f"{pin.package}=={pin.package_version}"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                str(workdir),
                spec,
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise SchemaError(f"pip download {spec} failed: {result.stderr.strip()[-500:]}")
        files = list(workdir.glob("*.whl"))
    else:
        raise SchemaError(f"unknown registry {pin.registry!r} for {pin.package}")
    if len(files) != 1:
        raise SchemaError(f"{pin.package}: expected one download, found {files}")
    digest = hashlib.sha256(files[0].read_bytes()).hexdigest()
    if digest != pin.sha256:
        raise SchemaError(
            f"{files[0].name}: SHA-256 {digest} does not match the pinned {pin.sha256}"
        )
    return files[0]


def package_tarball(download: Path) -> tarfile.TarFile:
    """The npm package tarball, from an npm ``.tgz`` or from a jsii wheel's ``_jsii/``."""
    if download.suffix == ".tgz":
        return tarfile.open(download, mode="r|gz")
    with zipfile.ZipFile(download) as wheel:
        inner = [n for n in wheel.namelist() if "/_jsii/" in n and n.endswith(".jsii.tgz")]
        if len(inner) != 1:
            raise SchemaError(f"{download.name}: expected one _jsii/*.jsii.tgz, found {inner}")
        data = wheel.read(inner[0])
    return tarfile.open(fileobj=io.BytesIO(data), mode="r|gz")


# --- reading the package -------------------------------------------------------------------

_CLASS = re.compile(r"^class (\w+) extends ")
_GETTER = re.compile(r"^    get (\w+)\(\) \{$")
_ATTRIBUTE = re.compile(r"(?:Attribute|interpolationForAttribute)\('([^']+)'\)")
# ``this._x = new ...(this, "x")`` in a constructor, or ``_x = new ...`` as a class field.
_FIELD = re.compile(r"(?:this\.|^\s+)_(\w+) = new [\w.]+\(this, \"([^\"]+)\"")
_RETURN_FIELD = re.compile(r"return this\._(\w+);")
# ``X.tfResourceType = "t";`` after the class, or ``static tfResourceType = "t";`` in it.
_RESOURCE_TYPE = re.compile(r"^(\w+)\.tfResourceType = \"([^\"]+)\";$")
_STATIC_TYPE = re.compile(r"^    static tfResourceType = \"([^\"]+)\";$")
_STRUCT_FUNCTION = re.compile(r"^function (\w+)ToTerraform\(struct\) \{$")
_STRUCT_FIELD = re.compile(r"^\s+\"?([A-Za-z0-9_-]+)\"?: .*?\bstruct!?\.(\w+)")
_CONFIG_FIELD = re.compile(r"^\s+\"?([A-Za-z0-9_-]+)\"?: .*?\bthis\._(\w+)")


@dataclass
class Package:
    """What one binding package says: its assembly and the names its JavaScript reads."""

    assembly: dict[str, Any]
    provider_version: str
    #: class name -> {camelCase property -> Terraform name}
    names: dict[str, dict[str, str]]
    #: class name -> Terraform type (resources and data sources)
    types: dict[str, str]


def read_package(tar: tarfile.TarFile) -> Package:
    assembly: dict[str, Any] | None = None
    package_json: dict[str, Any] | None = None
    gzipped: dict[str, bytes] = {}
    names: dict[str, dict[str, str]] = {}
    types: dict[str, str] = {}
    for member in tar:
        if not member.isfile():
            continue
        name = member.name
        handle = tar.extractfile(member)
        if handle is None:
            continue
        if name == "package/.jsii":
            assembly = json.load(handle)
        elif name == "package/.jsii.gz":
            gzipped[name] = handle.read()
        elif name == "package/package.json":
            package_json = json.load(handle)
        elif name.startswith("package/lib/") and name.endswith("/index.js"):
            _read_javascript(handle.read().decode("utf-8"), names, types)
    if assembly is not None and assembly.get("schema") == "jsii/file-redirect":
        # A compressed assembly: .jsii only points at .jsii.gz.
        target = f"package/{assembly['filename']}"
        if target not in gzipped:
            raise SchemaError(f"the assembly redirects to {target}, which is not in the package")
        assembly = json.loads(gzip.decompress(gzipped[target]))
    if assembly is None or package_json is None:
        raise SchemaError("the package has no .jsii assembly or no package.json")
    binding = package_json.get("cdktn") or package_json.get("cdktf") or {}
    version = str(binding.get("provider", {}).get("version", ""))
    if not version:
        raise SchemaError("package.json names no provider version (cdktf.provider.version)")
    return Package(assembly, version, names, types)


def _read_javascript(source: str, names: dict[str, dict[str, str]], types: dict[str, str]) -> None:
    """Terraform names by class (getters, nested objects) and by config struct.

    A struct's names come from its ``<struct>ToTerraform`` function
    (``push_endpoint: cdktf.stringToTerraform(struct.pushEndpoint)``), a resource's
    config from its ``synthesizeAttributes`` (``topic: ...(this._topic)``), stored under
    ``<Class>Config``, the name of its config struct.
    """
    current: dict[str, str] | None = None
    current_class = ""
    struct: dict[str, str] | None = None
    synthesize: dict[str, str] | None = None
    pending: str | None = None
    for line in source.splitlines():
        found = _STRUCT_FUNCTION.match(line)
        if found:
            struct_name = found.group(1)[0].upper() + found.group(1)[1:]
            struct = names.setdefault(struct_name, {})
            current = synthesize = pending = None
            continue
        if struct is not None:
            if line == "}":
                struct = None
            else:
                found = _STRUCT_FIELD.match(line)
                if found:
                    struct.setdefault(found.group(2), found.group(1))
            continue
        found = _CLASS.match(line)
        if found:
            current_class = found.group(1)
            current = names.setdefault(current_class, {})
            synthesize = pending = None
            continue
        found = _RESOURCE_TYPE.match(line)
        if found:
            types[found.group(1)] = found.group(2)
            continue
        if current is None:
            continue
        found = _STATIC_TYPE.match(line)
        if found:
            types[current_class] = found.group(1)
            continue
        if line == "    synthesizeAttributes() {":
            synthesize = names.setdefault(f"{current_class}Config", {})
            continue
        if synthesize is not None:
            if line == "    }":
                synthesize = None
            else:
                found = _CONFIG_FIELD.match(line)
                if found:
                    synthesize.setdefault(found.group(2), found.group(1))
            continue
        found = _GETTER.match(line)
        if found:
            pending = found.group(1)
            continue
        if pending is not None:
            attribute = _ATTRIBUTE.search(line)
            field_ref = _RETURN_FIELD.search(line)
            if attribute:
                current.setdefault(pending, attribute.group(1))
            elif field_ref and field_ref.group(1) in current:
                # A getter renamed around a reserved word (buildAttribute -> this._build).
                current.setdefault(pending, current[field_ref.group(1)])
            pending = None
        for field in _FIELD.finditer(line):
            current[field.group(1)] = field.group(2)


# --- building the schema -------------------------------------------------------------------

_DOC_NAME = re.compile(r"#([a-z0-9_]+) \w+#\1\}")
_SKIPPED_PROPERTIES = {
    "internalValue",
    "fqn",
    "terraformResourceType",
    "terraformGeneratorMetadata",
}


class _Builder:
    def __init__(self, package: Package) -> None:
        self.types: dict[str, Any] = package.assembly["types"]
        self.names = package.names

    def resource(self, fqn: str) -> dict[str, Any]:
        spec = self.types[fqn]
        config = spec["initializer"]["parameters"][2]["type"]["fqn"]
        return self.block(config, fqn)

    def block(
        self, struct_fqn: str | None, class_fqn: str | None, path: tuple[str, ...] = ()
    ) -> dict[str, Any]:
        key = f"{struct_fqn}|{class_fqn}"
        if key in path:
            # A recursive type (a few schemas nest a value type in itself): stop there.
            return {"attributes": {}, "blocks": {}, "recursive": True}
        path = (*path, key)
        attributes: dict[str, dict[str, Any]] = {}
        blocks: dict[str, dict[str, Any]] = {}
        block_classes: dict[str, str | None] = {}
        if struct_fqn is not None:
            struct_names = self.names.get(self.types[struct_fqn]["name"], {})
            for prop in self._properties(struct_fqn):
                docs = prop.get("docs", {})
                name = struct_names.get(prop["name"])
                if name is None:
                    # The link may sit in the summary, the remarks or a custom tag.
                    found = _DOC_NAME.search(json.dumps(docs).replace("\\n", " "))
                    if found is None:
                        raise SchemaError(f"{struct_fqn}.{prop['name']}: no Terraform name")
                    name = found.group(1)
                required = not prop.get("optional", False)
                nested = self._struct(prop["type"])
                if docs.get("summary", "").strip() == f"{name} block." and nested is not None:
                    blocks[name] = {"required": required, "struct": nested}
                else:
                    attributes[name] = {"required": required, "optional": not required}
        readable: dict[str, str | None] = {}
        if class_fqn is not None:
            class_name = self.types[class_fqn]["name"]
            mapping = self.names.get(class_name, {})
            for prop in self._properties(class_fqn):
                camel = prop["name"]
                if prop.get("static") or camel.endswith("Input") or camel in _SKIPPED_PROPERTIES:
                    continue
                name = mapping.get(camel)
                if name is None:
                    continue
                readable[name] = self._object_class(prop["type"])
        for name in blocks:
            block_classes[name] = readable.get(name)
        for name, object_class in readable.items():
            if name in blocks:
                continue
            attribute = attributes.setdefault(
                name, {"required": False, "optional": False, "computed": True}
            )
            if object_class is not None:
                attribute["nested"] = self.block(None, object_class, path)
        built_blocks = {
            name: {
                "required": spec["required"],
                "block": self.block(spec["struct"], block_classes[name], path),
            }
            for name, spec in blocks.items()
        }
        for spec in attributes.values():
            spec.setdefault("computed", False)
        return {"attributes": attributes, "blocks": built_blocks}

    def _properties(self, fqn: str) -> list[dict[str, Any]]:
        spec = self.types.get(fqn)
        if spec is None:
            return []
        props = list(spec.get("properties", []))
        # Struct interfaces may extend others of the same assembly.
        for parent in spec.get("interfaces", []):
            if parent in self.types:
                props.extend(self._properties(parent))
        return props

    def _fqns(self, type_ref: dict[str, Any]) -> Iterator[str]:
        if "fqn" in type_ref:
            yield type_ref["fqn"]
        for option in type_ref.get("union", {}).get("types", []):
            yield from self._fqns(option)
        collection = type_ref.get("collection")
        if collection:
            yield from self._fqns(collection["elementtype"])

    def _struct(self, type_ref: dict[str, Any]) -> str | None:
        for fqn in self._fqns(type_ref):
            spec = self.types.get(fqn)
            if spec is not None and spec.get("datatype"):
                return fqn
        return None

    def _object_class(self, type_ref: dict[str, Any]) -> str | None:
        """The OutputReference class behind a property (through a List/Map's get())."""
        for fqn in self._fqns(type_ref):
            spec = self.types.get(fqn)
            if spec is None or spec.get("kind") != "class":
                continue
            for method in spec.get("methods", []):
                if method.get("name") == "get" and "returns" in method:
                    inner = method["returns"]["type"].get("fqn")
                    if inner in self.types:
                        return str(inner)
            return fqn
        return None


def build_schema(package: Package) -> dict[str, Any]:
    builder = _Builder(package)
    resources: dict[str, Any] = {}
    data_sources: dict[str, Any] = {}
    for fqn, spec in package.assembly["types"].items():
        if spec.get("kind") != "class":
            continue
        base = str(spec.get("base", ""))
        kind = base.rsplit(".", 1)[-1]
        if kind not in ("TerraformResource", "TerraformDataSource"):
            continue
        tf_type = package.types.get(spec["name"])
        if tf_type is None:
            raise SchemaError(f"{fqn}: no tfResourceType in its JavaScript")
        target = resources if kind == "TerraformResource" else data_sources
        target[tf_type] = builder.resource(fqn)
    if not resources:
        raise SchemaError("the assembly holds no resource classes")
    return {"resources": resources, "data_sources": data_sources}


def install_one(pin: Pin, out_dir: Path) -> Path:
    with tempfile.TemporaryDirectory(prefix="provider-schema-") as tmp:
        download = fetch(pin, Path(tmp))
        with package_tarball(download) as tar:
            package = read_package(tar)
    if package.provider_version != pin.version:
        raise SchemaError(
            f"{pin.package}@{pin.package_version} carries {pin.provider} "
            f"{package.provider_version}, not {pin.version}"
        )
    schema = {
        "provider": pin.provider,
        "version": pin.version,
        "package": f"{pin.package}@{pin.package_version}",
        **build_schema(package),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / pin.filename
    path.write_text(json.dumps(schema, sort_keys=True, separators=(",", ":")))
    return path


def load(provider: str, version: str, directory: Path = DEFAULT_DIR) -> dict[str, Any]:
    """The installed schema of one provider version; a clear error when it is missing."""
    path = directory / f"{provider}-{version}.json"
    if not path.is_file():
        raise SchemaError(f"{path} is missing: run `make provider-schema` (part of make test)")
    schema: dict[str, Any] = json.loads(path.read_text())
    return schema


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    install = sub.add_parser("install", help="download and extract every pinned schema")
    install.add_argument("directory", type=Path, nargs="?", default=DEFAULT_DIR)
    args = parser.parse_args(argv)
    for pin in PINS:
        try:
            path = install_one(pin, args.directory)
        except SchemaError as exc:
            print(f"provider_schema: {pin.provider} {pin.version}: {exc}", file=sys.stderr)
            return 1
        print(f"provider_schema: {pin.provider} {pin.version} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
