"""Real Prometheus (back-filled with promtool) and Alertmanager servers on 127.0.0.1."""

from __future__ import annotations

import shutil
import subprocess
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .process import (
    LOCALHOST,
    HarnessError,
    ManagedProcess,
    Service,
    free_port,
    get_json,
    http_ok,
    make_workdir,
    retry_on_port_race,
    tail,
)
from .tools import ensure_executable

# No scrape targets: every sample comes from back-filled blocks, so runs are reproducible.
PROMETHEUS_CONFIG = "scrape_configs: []\n"

BACKFILL_TIMEOUT = 300.0


def normalize_prefix(prefix: str | None) -> str:
    """``None``/``"/"`` -> ``""``; otherwise a path with a leading and no trailing slash."""
    if not prefix or prefix.strip("/") == "":
        return ""
    return "/" + prefix.strip("/")


class PrometheusServer(Service):
    """A running Prometheus; ``url`` includes the route prefix and has no trailing slash."""

    def __init__(
        self,
        process: ManagedProcess,
        port: int,
        startup_seconds: float,
        route_prefix: str,
        data_dir: Path,
    ) -> None:
        super().__init__(process, port, startup_seconds)
        self.route_prefix = route_prefix
        self.data_dir = data_dir
        self.base_url = f"http://{LOCALHOST}:{port}"
        self.url = self.base_url + route_prefix

    def query(self, expr: str, time: float | None = None) -> dict[str, Any]:
        """GET ``/api/v1/query`` and return the decoded JSON body (any status)."""
        params = {"query": expr}
        if time is not None:
            params["time"] = repr(time)
        result: dict[str, Any] = get_json(
            f"{self.url}/api/v1/query?{urllib.parse.urlencode(params)}"
        )
        return result


class AlertmanagerServer(Service):
    """A running Alertmanager (gossip disabled); ``url`` has no trailing slash."""

    def __init__(
        self, process: ManagedProcess, port: int, startup_seconds: float, route_prefix: str
    ) -> None:
        super().__init__(process, port, startup_seconds)
        self.url = f"http://{LOCALHOST}:{port}{route_prefix}"


def backfill(promtool: str, openmetrics_files: Sequence[Path], data_dir: Path) -> None:
    """Turn each OpenMetrics file into TSDB blocks inside ``data_dir`` (one promtool call each)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    for path in openmetrics_files:
        if not Path(path).is_file():
            raise HarnessError(f"OpenMetrics file not found: {path}")
        argv = [promtool, "tsdb", "create-blocks-from", "openmetrics", str(path), str(data_dir)]
        try:
            result = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=BACKFILL_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise HarnessError(f"promtool back-fill of {path} timed out") from exc
        if result.returncode != 0:
            raise HarnessError(
                f"promtool back-fill of {path} failed (exit {result.returncode}):\n"
                f"command: {' '.join(argv)}\n{tail(result.stdout + result.stderr)}"
            )


def start_prometheus(
    openmetrics_files: Sequence[Path] | None = None,
    route_prefix: str | None = None,
    *,
    config_yaml: str = PROMETHEUS_CONFIG,
    extra_args: Sequence[str] = (),
    timeout: float = 60.0,
) -> PrometheusServer:
    """Back-fill ``openmetrics_files`` into a fresh TSDB, start Prometheus on it, wait ready.

    Blocks are only picked up at startup, hence back-fill first. Retention is 100y so that
    back-filled data dated far in the past is never deleted. ``config_yaml`` replaces the
    default config (no scrape targets), e.g. to add rule files or an Alertmanager.
    """
    prometheus = ensure_executable("prometheus", "prometheus")
    promtool = ensure_executable("promtool", "prometheus")
    prefix = normalize_prefix(route_prefix)

    def attempt() -> PrometheusServer:
        workdir = make_workdir("prometheus")
        data_dir = workdir / "data"
        config = workdir / "prometheus.yml"
        try:
            config.write_text(config_yaml)
            backfill(promtool, list(openmetrics_files or ()), data_dir)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        port = free_port()
        argv = [
            prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={data_dir}",
            f"--web.listen-address={LOCALHOST}:{port}",
            "--storage.tsdb.retention.time=100y",
            # Explicit loopback external URL: the default uses the hostname in UI links.
            f"--web.external-url=http://{LOCALHOST}:{port}{prefix}",
        ]
        if prefix:
            argv.append(f"--web.route-prefix={prefix}")
        argv.extend(extra_args)
        process = ManagedProcess("prometheus", argv, workdir)
        ready_url = f"http://{LOCALHOST}:{port}{prefix}/-/ready"
        elapsed = process.wait_until(http_ok(ready_url), f"ready at {ready_url}", timeout)
        return PrometheusServer(process, port, elapsed, prefix, data_dir)

    return retry_on_port_race(attempt)


def start_alertmanager(
    config_yaml: str,
    *,
    route_prefix: str | None = None,
    extra_args: Sequence[str] = (),
    timeout: float = 60.0,
) -> AlertmanagerServer:
    """Start Alertmanager with ``config_yaml`` and wait for ``/-/ready``."""
    alertmanager = ensure_executable("prometheus-alertmanager", "prometheus-alertmanager")
    prefix = normalize_prefix(route_prefix)

    def attempt() -> AlertmanagerServer:
        workdir = make_workdir("alertmanager")
        config = workdir / "alertmanager.yml"
        config.write_text(config_yaml)
        port = free_port()
        argv = [
            alertmanager,
            f"--config.file={config}",
            f"--storage.path={workdir / 'data'}",
            f"--web.listen-address={LOCALHOST}:{port}",
            # Empty address disables HA gossip, which would otherwise bind 0.0.0.0:9094.
            "--cluster.listen-address=",
            f"--web.external-url=http://{LOCALHOST}:{port}{prefix}",
        ]
        if prefix:
            argv.append(f"--web.route-prefix={prefix}")
        argv.extend(extra_args)
        process = ManagedProcess("alertmanager", argv, workdir)
        ready_url = f"http://{LOCALHOST}:{port}{prefix}/-/ready"
        elapsed = process.wait_until(http_ok(ready_url), f"ready at {ready_url}", timeout)
        return AlertmanagerServer(process, port, elapsed, prefix)

    return retry_on_port_race(attempt)
