"""The module README's Requirements, Inputs and Outputs tables are generated and current.

``python infra/terraform_docs.py`` writes them between the terraform-docs markers from
versions.tf, variables.tf and outputs.tf; ``--check`` fails when they differ.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import hcl2

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "infra" / "terraform"
sys.path.insert(0, str(ROOT / "infra"))
import terraform_docs  # noqa: E402


def test_the_readme_tables_are_the_generated_ones() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "infra" / "terraform_docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    readme = (MODULE / "README.md").read_text()
    assert terraform_docs.render(MODULE) in readme
    assert readme.count(terraform_docs.BEGIN) == 1 and readme.count(terraform_docs.END) == 1


def test_every_variable_and_output_has_its_row() -> None:
    block = terraform_docs.render(MODULE)
    inputs, outputs_table = block.split("### Outputs")
    with open(MODULE / "variables.tf") as handle:
        variables = hcl2.load(handle)["variable"]
    with open(MODULE / "outputs.tf") as handle:
        outputs = hcl2.load(handle)["output"]
    for entry in variables:
        for name, spec in entry.items():
            name = name.strip('"')
            required = "n/a" if "default" not in spec else ""
            [row] = [line for line in inputs.splitlines() if line.startswith(f"| `{name}` |")]
            assert row.endswith("| yes |" if required else "| no |"), row
            if spec.get("sensitive") is True:
                assert "Sensitive." in row, row
    for entry in outputs:
        for name in entry:
            assert f"| `{name.strip(chr(34))}` |" in outputs_table
    assert "| google | `>= 6.1, < 9` |" in block


def test_a_changed_variable_makes_the_check_fail_until_regenerated(tmp_path: Path) -> None:
    copy = tmp_path / "terraform"
    shutil.copytree(MODULE, copy, ignore=shutil.ignore_patterns("examples"))
    variables = copy / "variables.tf"
    source = variables.read_text()
    old = 'description = "Whether to enable the project services the module uses'
    assert old in source
    variables.write_text(source.replace(old, 'description = "Whether to turn on the APIs'))
    assert terraform_docs.main(["--check", str(copy)]) == 1
    assert terraform_docs.main([str(copy)]) == 0
    assert "Whether to turn on the APIs" in (copy / "README.md").read_text()
    assert terraform_docs.main(["--check", str(copy)]) == 0
