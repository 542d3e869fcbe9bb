"""A real functions-framework server (gunicorn) running a function from a source file."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

from .process import (
    LOCALHOST,
    HarnessError,
    ManagedProcess,
    Service,
    free_port,
    make_workdir,
    port_open,
    retry_on_port_race,
)

SIGNATURE_TYPES = ("http", "event", "cloudevent", "typed")


class FunctionServer(Service):
    """A running function; ``log()`` returns what it printed (stdout and stderr)."""

    def __init__(
        self,
        process: ManagedProcess,
        port: int,
        startup_seconds: float,
        target: str,
        signature_type: str,
    ) -> None:
        super().__init__(process, port, startup_seconds)
        self.target = target
        self.signature_type = signature_type
        self.url = f"http://{LOCALHOST}:{port}"


def functions_framework_bin() -> Path:
    """The ``functions-framework`` script of the running interpreter's environment."""
    # Not resolved: a venv's python is a symlink and resolving it would leave the venv.
    script = Path(sys.executable).parent / "functions-framework"
    if not script.is_file():
        raise HarnessError(f"{script} not found; install functions-framework into {sys.prefix}")
    return script


def start_function(
    target: str,
    source: Path,
    signature_type: str = "http",
    env: Mapping[str, str] | None = None,
    *,
    timeout: float = 30.0,
) -> FunctionServer:
    """Serve ``target`` from ``source`` (a file, or a directory holding main.py).

    The child inherits this process's environment overlaid with ``env``. Readiness means
    the port accepts connections: gunicorn binds only after the module imported, and
    requests that arrive before its worker is up wait in the listen backlog.
    """
    if signature_type not in SIGNATURE_TYPES:
        raise HarnessError(f"signature_type must be one of {SIGNATURE_TYPES}: {signature_type!r}")
    source = Path(source)
    if source.is_dir():
        source = source / "main.py"
    if not source.is_file():
        raise HarnessError(f"function source not found: {source}")
    script = functions_framework_bin()
    child_env = {
        **os.environ,
        # Unbuffered, so log() shows prints while the server is still running.
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }

    def attempt() -> FunctionServer:
        workdir = make_workdir(f"function-{target}")
        port = free_port()
        argv = [
            str(script),
            "--target",
            target,
            "--source",
            str(source),
            "--signature-type",
            signature_type,
            "--host",
            LOCALHOST,
            "--port",
            str(port),
        ]
        # cwd = the source's directory so relative paths in the function behave as deployed.
        process = ManagedProcess(
            f"function-{target}",
            argv,
            workdir,
            env=child_env,
            cwd=source.parent,
            # SIGINT is gunicorn's quick shutdown; SIGTERM waits ~2s for keep-alive sockets.
            stop_signal=signal.SIGINT,
        )
        elapsed = process.wait_until(
            port_open(port), f"accepting connections on port {port}", timeout
        )
        return FunctionServer(process, port, elapsed, target, signature_type)

    return retry_on_port_race(attempt)
