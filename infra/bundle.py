"""Build the Cloud Functions source bundle exactly as the Terraform module does.

``make bundle`` (or ``python infra/bundle.py [--out DIR]``) writes DIR/ with ``main.py``,
``requirements.txt`` (pinned) and the ``loopbreaker`` package, and DIR.zip beside it. The
module's ``archive_file`` takes the same files by the same patterns
(``local.bundle_patterns`` in ``infra/terraform/bundle.tf``); a test checks both agree.
"""

from __future__ import annotations

import argparse
import shutil
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIBRARY = ROOT / "shared" / "loopbreaker"
#: The patterns of local.bundle_patterns, relative to the library directory.
PATTERNS = ("**/*.py", "py.typed", "signals/catalog/*.toml")


def library_files() -> list[Path]:
    found: set[Path] = set()
    for pattern in PATTERNS:
        found.update(
            p for p in LIBRARY.glob(pattern) if p.is_file() and "__pycache__" not in p.parts
        )
    return sorted(found)


def build(out: Path) -> Path:
    if out.exists():
        shutil.rmtree(out)
    (out / "loopbreaker").mkdir(parents=True)
    shutil.copyfile(ROOT / "functions" / "main.py", out / "main.py")
    shutil.copyfile(ROOT / "functions" / "requirements.txt", out / "requirements.txt")
    for path in library_files():
        target = out / "loopbreaker" / path.relative_to(LIBRARY)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    archive = out.with_suffix(".zip")
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        for path in sorted(p for p in out.rglob("*") if p.is_file()):
            zipped.write(path, path.relative_to(out).as_posix())
    return archive


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "bundle")
    args = parser.parse_args()
    archive = build(args.out)
    print(f"bundle: {args.out} ({archive.name})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
