"""The function source bundle, built as Terraform builds it, installs and imports cleanly.

``infra/bundle.py`` is what ``make bundle`` runs; the Terraform module's archive_file
takes the same files by the patterns in ``local.bundle_patterns``. The bundle's pinned
requirements are installed from PyPI into a fresh virtual environment (no loopbreaker
installed there), and every entry point is imported from the bundle directory, as the
Cloud Functions runtime does.
"""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import hcl2
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "infra"))
import bundle  # noqa: E402

TARGETS = ("on_log_entry", "on_schedule", "on_chat_action", "on_remediation_request")


def terraform_patterns() -> list[str]:
    with open(ROOT / "infra" / "terraform" / "bundle.tf") as handle:
        parsed = hcl2.load(handle)
    for block in parsed.get("locals", []):
        if "bundle_patterns" in block:
            # python-hcl2 8 keeps the quotes of string literals.
            return [str(p).strip('"') for p in block["bundle_patterns"]]
    raise AssertionError("bundle.tf defines no local.bundle_patterns")


def test_make_bundle_and_terraform_take_the_same_files(tmp_path: Path) -> None:
    assert sorted(terraform_patterns()) == sorted(bundle.PATTERNS)
    out = tmp_path / "bundle"
    archive = bundle.build(out)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    library = sorted(
        f"loopbreaker/{p.relative_to(bundle.LIBRARY).as_posix()}" for p in bundle.library_files()
    )
    assert files == sorted(["main.py", "requirements.txt", *library])
    assert "loopbreaker/remediation/executor.py" in files and "loopbreaker/py.typed" in files
    assert archive.is_file()
    requirements = (out / "requirements.txt").read_text().splitlines()
    pins = [r for r in requirements if r and not r.startswith("#")]
    assert pins and all("==" in r for r in pins), "the bundle's requirements must be pinned"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("bundle")
    out = root / "bundle"
    bundle.build(out)
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(out / "requirements.txt")],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out, python


def test_every_entry_point_imports_from_the_bundle_in_a_fresh_venv(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    out, python = installed
    code = (
        "import main, sys\n"
        f"missing = [t for t in {TARGETS!r} if not callable(getattr(main, t, None))]\n"
        "assert not missing, missing\n"
        "import loopbreaker\n"
        "assert loopbreaker.__file__.startswith(sys.argv[1]), loopbreaker.__file__\n"
        "print('ok')\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "LOOPBREAKER_STORE": f"sqlite:{tmp_path / 'incidents.sqlite'}",
        "NO_GCE_CHECK": "true",
    }
    done = subprocess.run(
        [str(python), "-c", code, str(out)],
        cwd=out,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


def test_the_bundle_venv_has_no_loopbreaker_of_its_own(installed: tuple[Path, Path]) -> None:
    _, python = installed
    done = subprocess.run(
        [str(python), "-c", "import loopbreaker"], capture_output=True, text=True, cwd="/"
    )
    assert done.returncode != 0  # the library comes only with the bundle
