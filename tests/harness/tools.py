"""Locate the external binaries the services need, installing Debian packages when missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

from .process import HarnessError, tail

ENSURE_TOOLS = Path(__file__).with_name("ensure_tools.sh")

_install_lock = threading.Lock()


def _which(name: str) -> str | None:
    # /usr/bin is checked explicitly because CI may run with a PATH that lacks it.
    found = shutil.which(name)
    if found:
        return found
    candidate = Path("/usr/bin") / name
    return str(candidate) if os.access(candidate, os.X_OK) else None


def _apt_get(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    try:
        return subprocess.run(
            ["apt-get", *args],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise HarnessError(f"apt-get {' '.join(args)} failed: {exc}") from exc


def apt_install(package: str) -> None:
    """``apt-get install -y PACKAGE``; refresh the package lists only if the first try fails."""
    if os.geteuid() != 0:
        raise HarnessError(
            f"Debian package {package!r} is missing and we are not root; install it or run "
            f"{ENSURE_TOOLS} as root"
        )
    install = ("install", "-y", "--no-install-recommends", package)
    result = _apt_get(*install, timeout=900)
    if result.returncode != 0:
        # Usually "Unable to locate package" on a machine whose lists were never fetched.
        _apt_get("update", timeout=600)
        result = _apt_get(*install, timeout=900)
    if result.returncode != 0:
        output = tail(result.stdout + result.stderr, 20)
        raise HarnessError(f"apt-get install -y {package} failed:\n{output}")


def ensure_executable(name: str, apt_package: str) -> str:
    """Return the path of ``name``, installing ``apt_package`` first if it is absent."""
    found = _which(name)
    if found:
        return found
    with _install_lock:
        found = _which(name)
        if not found:
            apt_install(apt_package)
            found = _which(name)
    if not found:
        raise HarnessError(f"installed {apt_package!r} but {name!r} is still not found")
    return found


def gcloud_sdk_root() -> Path:
    """Return the Cloud SDK root, failing clearly when gcloud is not installed."""
    gcloud = _which("gcloud")
    if gcloud is None:
        raise HarnessError(f"gcloud is not installed; run {ENSURE_TOOLS} for details")
    # bin/gcloud is a symlink into <sdk_root>/bin/ for the Debian package.
    return Path(gcloud).resolve().parent.parent


def ensure_gcloud_emulator(component_dir: str, apt_package: str) -> str:
    """Return the gcloud path once the emulator component and java are known to be present.

    gcloud would otherwise try to download the component (no network here) and hang on
    that, so check the component's directory up front.
    """
    root = gcloud_sdk_root()
    if not (root / "platform" / component_dir).is_dir():
        raise HarnessError(
            f"gcloud component {component_dir!r} missing under {root}/platform "
            f"(Debian-style installs ship it as package {apt_package}); "
            f"run {ENSURE_TOOLS} for details"
        )
    if _which("java") is None:
        raise HarnessError(f"java is not installed (needed by {component_dir}); run {ENSURE_TOOLS}")
    gcloud = _which("gcloud")
    assert gcloud is not None  # gcloud_sdk_root() found it
    return gcloud
