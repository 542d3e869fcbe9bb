"""Process plumbing for the harness: free ports, managed subprocesses and bounded waits.

Every service runs in its own process group (so wrapper scripts such as ``gcloud`` cannot
orphan the real server), logs to a file inside a private temp dir, and is registered so that
it is killed at interpreter exit or on SIGTERM even when a fixture teardown never runs.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self, TypeVar

LOCALHOST = "127.0.0.1"
LOG_TAIL_LINES = 40

# Bypass any *_proxy environment variables: every harness request targets loopback.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

# What the services print when the port picked by free_port() was taken in the meantime.
_PORT_IN_USE = re.compile(
    r"address already in use|BindException|failed to bind|Connection in use", re.IGNORECASE
)


class HarnessError(RuntimeError):
    """A service could not be installed, started or stopped."""


class PortInUseError(HarnessError):
    """The service lost the race for its port; callers retry on a fresh one."""


def free_port() -> int:
    """Return a currently free TCP port on 127.0.0.1 (the OS picks it via bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOCALHOST, 0))
        port: int = sock.getsockname()[1]
        return port


def make_workdir(name: str) -> Path:
    """Create a private temp dir for one service instance."""
    return Path(tempfile.mkdtemp(prefix=f"loopbreaker-{name}-"))


def http_status(url: str, method: str = "GET", timeout: float = 2.0) -> int | None:
    """Return the HTTP status of ``url``, or None when nothing answered."""
    request = urllib.request.Request(url, method=method)
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def get_json(url: str, timeout: float = 30.0) -> Any:
    """GET ``url`` and decode its JSON body, whatever the HTTP status."""
    try:
        with _OPENER.open(url, timeout=timeout) as response:
            body: bytes = response.read()
    except urllib.error.HTTPError as exc:
        body = exc.read()
    except OSError as exc:
        raise HarnessError(f"GET {url} failed: {exc}") from exc
    return json.loads(body)


def http_ok(url: str) -> Callable[[], bool]:
    """Probe that succeeds once ``url`` answers 200."""
    return lambda: http_status(url) == 200


def port_open(port: int, host: str = LOCALHOST) -> Callable[[], bool]:
    """Probe that succeeds once ``host:port`` accepts TCP connections."""

    def probe() -> bool:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return True
        except OSError:
            return False

    return probe


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of ``text``."""
    return "\n".join(text.splitlines()[-lines:])


class ManagedProcess:
    """A subprocess in its own process group that owns (and finally deletes) ``workdir``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        workdir: Path,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        stop_signal: signal.Signals = signal.SIGTERM,
    ) -> None:
        self.name = name
        self.stop_signal = stop_signal
        self.argv = [str(arg) for arg in argv]
        self.workdir = workdir
        self.log_path = workdir / f"{name}.log"
        self._final_log: str | None = None
        # Re-entrant: the SIGTERM handler may call stop() while stop() is on the stack.
        self._lock = threading.RLock()
        self._log_file = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                # New session => new process group we can signal as a whole.
                start_new_session=True,
            )
        except OSError as exc:
            self._log_file.close()
            shutil.rmtree(workdir, ignore_errors=True)
            raise HarnessError(f"{name}: cannot execute {self.argv[0]}: {exc}") from exc
        _register(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def is_running(self) -> bool:
        return self.proc.poll() is None

    def log(self) -> str:
        """Everything the process wrote to stdout/stderr so far (kept after stop())."""
        if self._final_log is not None:
            return self._final_log
        try:
            return self.log_path.read_bytes().decode(errors="replace")
        except OSError:
            return ""

    def wait_until(self, probe: Callable[[], bool], what: str, timeout: float) -> float:
        """Poll ``probe`` until true; return elapsed seconds.

        On timeout or early exit the process is stopped and a HarnessError carrying the
        command line and the tail of the log is raised.
        """
        start = time.monotonic()
        deadline = start + timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                raise self._startup_failure(f"exited with code {code} before {what}")
            if probe():
                return time.monotonic() - start
            if time.monotonic() >= deadline:
                raise self._startup_failure(f"was not {what} within {timeout:g}s")
            time.sleep(0.05)

    def _startup_failure(self, problem: str) -> HarnessError:
        self.stop()
        log = self.log()
        message = (
            f"{self.name} {problem}\n"
            f"command: {' '.join(self.argv)}\n"
            f"--- last {LOG_TAIL_LINES} log lines ---\n{tail(log) or '(empty log)'}"
        )
        if _PORT_IN_USE.search(log):
            return PortInUseError(message)
        return HarnessError(message)

    def stop(self, grace: float = 10.0) -> None:
        """Terminate the whole process group, then delete the workdir. Idempotent."""
        with self._lock:
            if self._final_log is not None:
                return
            try:
                _kill_group(self.proc, self.stop_signal, grace)
            finally:
                self._log_file.close()
                self._final_log = self.log()
                shutil.rmtree(self.workdir, ignore_errors=True)
                _unregister(self)


def _group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in group ``pgid``.

    Orphaned grandchildren are reaped by init, which here does so only every second or
    so; their zombies would keep ``killpg(pgid, 0)`` succeeding, so read /proc instead.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return True
    for pid in entries:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # exited meanwhile
        # Fields after the parenthesised command name: state ppid pgrp ...
        state, _ppid, pgrp = stat.rpartition(")")[2].split()[:3]
        if int(pgrp) == pgid and state not in ("Z", "X"):
            return True
    return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _kill_group(proc: subprocess.Popen[bytes], sig: signal.Signals, grace: float) -> None:
    pgid = proc.pid  # start_new_session makes the child its group leader
    _signal_group(pgid, sig)
    deadline = time.monotonic() + grace
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _signal_group(pgid, signal.SIGKILL)
        proc.wait(timeout=10)
    # Grandchildren (the emulator JVM under gcloud's wrapper) can outlive the leader.
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _group_alive(pgid):
        _signal_group(pgid, signal.SIGKILL)


S = TypeVar("S")


def retry_on_port_race(start: Callable[[], S], attempts: int = 3) -> S:
    """Call ``start`` again when the service lost its free port to another process."""
    for _ in range(attempts - 1):
        try:
            return start()
        except PortInUseError:
            continue
    return start()


class Service:
    """A started service: one ManagedProcess listening on ``port`` on 127.0.0.1."""

    def __init__(self, process: ManagedProcess, port: int, startup_seconds: float) -> None:
        self.process = process
        self.port = port
        # Wall time from spawning the process until it answered its readiness probe.
        self.startup_seconds = startup_seconds

    def log(self) -> str:
        """Captured stdout+stderr of the service (still available after stop())."""
        return self.process.log()

    def stop(self) -> None:
        """Stop the process group and delete the service's temp dir. Idempotent."""
        self.process.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# --- safety net: kill whatever is still running when the interpreter goes away -------------

_live: set[ManagedProcess] = set()
_live_lock = threading.RLock()  # re-entrant for the same reason as ManagedProcess._lock
_sigterm_installed = False


def _register(process: ManagedProcess) -> None:
    with _live_lock:
        _live.add(process)
    _install_sigterm_handler()


def _unregister(process: ManagedProcess) -> None:
    with _live_lock:
        _live.discard(process)


def stop_all() -> None:
    """Stop every process the harness started that is still running."""
    with _live_lock:
        processes = list(_live)
    for process in processes:
        with contextlib.suppress(Exception):
            process.stop(grace=3.0)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    stop_all()
    # Then die the way SIGTERM would have killed us, so the exit status stays honest.
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_sigterm_handler() -> None:
    # CI timeouts send SIGTERM, which skips atexit; without this the emulator JVMs would
    # outlive pytest. Only take over the default disposition, never someone else's handler.
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    _sigterm_installed = True
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)


atexit.register(stop_all)
