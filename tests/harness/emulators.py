"""Google Cloud Pub/Sub and Firestore emulators, started through ``gcloud`` on 127.0.0.1."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

from .process import (
    LOCALHOST,
    HarnessError,
    ManagedProcess,
    Service,
    free_port,
    http_ok,
    http_status,
    make_workdir,
    retry_on_port_race,
)
from .tools import ensure_gcloud_emulator

DEFAULT_PROJECT = "test-project"


def _gcloud_env(workdir: Path) -> dict[str, str]:
    """Environment that isolates gcloud from the user's config and keeps it offline."""
    return {
        **os.environ,
        # A private config dir: no shared emulator state, no clash between parallel runs.
        "CLOUDSDK_CONFIG": str(workdir / "gcloud-config"),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
        "CLOUDSDK_CORE_DISABLE_USAGE_REPORTING": "true",
        "CLOUDSDK_COMPONENT_MANAGER_DISABLE_UPDATE_CHECK": "true",
    }


class _Emulator(Service):
    def __init__(
        self, process: ManagedProcess, port: int, startup_seconds: float, project: str
    ) -> None:
        super().__init__(process, port, startup_seconds)
        self.project = project
        self.host_port = f"{LOCALHOST}:{port}"
        self.url = f"http://{self.host_port}"


class PubSubEmulator(_Emulator):
    """A running Pub/Sub emulator; state lives as long as the process."""

    @property
    def env(self) -> dict[str, str]:
        """Variables that point google-cloud-pubsub clients at this emulator."""
        return {"PUBSUB_EMULATOR_HOST": self.host_port, "PUBSUB_PROJECT_ID": self.project}


class FirestoreEmulator(_Emulator):
    """A running Firestore emulator in native mode."""

    @property
    def env(self) -> dict[str, str]:
        """Variables that point google-cloud-firestore clients at this emulator."""
        return {
            "FIRESTORE_EMULATOR_HOST": self.host_port,
            "GCLOUD_PROJECT": self.project,
            "GOOGLE_CLOUD_PROJECT": self.project,
        }

    def reset(self, project: str | None = None) -> None:
        """Delete every document of ``project`` (default: the emulator's project)."""
        target = project or self.project
        url = f"{self.url}/emulator/v1/projects/{target}/databases/(default)/documents"
        status = http_status(url, method="DELETE", timeout=30.0)
        if status != 200:
            raise HarnessError(f"Firestore emulator reset failed: DELETE {url} -> {status}")


def _start_gcloud_emulator(
    name: str,
    component_dir: str,
    apt_package: str,
    flags: Callable[[Path], list[str]],
    timeout: float,
) -> tuple[ManagedProcess, int, float]:
    gcloud = ensure_gcloud_emulator(component_dir, apt_package)

    def attempt() -> tuple[ManagedProcess, int, float]:
        workdir = make_workdir(name)
        port = free_port()
        argv = [
            gcloud,
            "beta",
            "emulators",
            name,
            "start",
            f"--host-port={LOCALHOST}:{port}",
            *flags(workdir),
        ]
        # SIGKILL: state is in memory and discarded anyway; a graceful JVM stop costs ~2s.
        process = ManagedProcess(
            name, argv, workdir, env=_gcloud_env(workdir), stop_signal=signal.SIGKILL
        )
        url = f"http://{LOCALHOST}:{port}/"
        elapsed = process.wait_until(http_ok(url), f"answering HTTP at {url}", timeout)
        return process, port, elapsed

    return retry_on_port_race(attempt)


def start_pubsub_emulator(
    project: str = DEFAULT_PROJECT, *, timeout: float = 90.0
) -> PubSubEmulator:
    """``gcloud beta emulators pubsub start`` on a free port; wait until it answers HTTP."""

    def flags(workdir: Path) -> list[str]:
        data_dir = workdir / "pubsub-data"
        data_dir.mkdir()  # gcloud writes env.yaml there but does not create it
        return [f"--project={project}", f"--data-dir={data_dir}"]

    process, port, elapsed = _start_gcloud_emulator(
        "pubsub", "pubsub-emulator", "google-cloud-cli-pubsub-emulator", flags, timeout
    )
    return PubSubEmulator(process, port, elapsed, project)


def start_firestore_emulator(
    project: str = DEFAULT_PROJECT, *, timeout: float = 90.0
) -> FirestoreEmulator:
    """``gcloud beta emulators firestore start`` (native mode); wait until it answers HTTP.

    The emulator serves any project id; ``project`` only sets ``env`` and ``reset()``.
    """
    process, port, elapsed = _start_gcloud_emulator(
        "firestore",
        "cloud-firestore-emulator",
        "google-cloud-cli-firestore-emulator",
        lambda _workdir: ["--database-mode=firestore-native"],
        timeout,
    )
    return FirestoreEmulator(process, port, elapsed, project)
