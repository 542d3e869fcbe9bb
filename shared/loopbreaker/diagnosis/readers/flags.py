"""The live-source flags of ``loopbreaker diagnose``, and the options they give."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopbreaker.argtypes import TIMEOUT_SECONDS, bounded_int
from loopbreaker.diagnosis.readers.options import (
    DEFAULT_MAX_LOG_ENTRIES,
    DEFAULT_SOURCE_TIMEOUT,
    Mode,
    SourceOptions,
)
from loopbreaker.errors import InvalidInput

if TYPE_CHECKING:
    pass

#: ``--max-log-entries`` at most: one diagnosis reads a window, not the project's history.
MAX_LOG_ENTRIES = 100_000


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The live-source flags of ``loopbreaker diagnose``."""
    group = parser.add_argument_group(
        "live sources",
        "Explicit sources win over --telemetry files; with --project, live readers fill in "
        "what the files lack (auto). 401/403, network errors and timeouts mark that evidence "
        "unavailable and the diagnosis goes on.",
    )
    group.add_argument(
        "--prometheus-url",
        metavar="URL",
        type=http_url,
        help="Prometheus HTTP API base URL (self-hosted, kube-prometheus-stack, or a "
        "Managed Prometheus .../location/global/prometheus URL); wins over metrics.om",
    )
    group.add_argument(
        "--prometheus-cluster-label",
        metavar="NAME|none",
        type=cluster_label_name,
        help="the label that names the cluster on the Prometheus' series (cluster, "
        "cluster_name, ...), or none for a Prometheus of one cluster (default: found out "
        "from the series the server holds)",
    )
    add_auth_flags(group)
    modes = [m.value for m in Mode]
    group.add_argument(
        "--managed-prometheus",
        choices=modes,
        default=Mode.AUTO.value,
        help="query Google Managed Prometheus of --project with ADC (default auto: when no "
        "metrics.om and no --prometheus-url)",
    )
    group.add_argument(
        "--live-logs",
        choices=modes,
        default=Mode.AUTO.value,
        help="read Cloud Logging of --project (default auto: when no logs.json)",
    )
    group.add_argument(
        "--kubeconfig", metavar="PATH", type=Path, help="read nodes and pods live via a kubeconfig"
    )
    group.add_argument("--kube-context", metavar="NAME", help="kubeconfig context to use")
    group.add_argument(
        "--live-kube",
        choices=modes,
        default=Mode.AUTO.value,
        help="read nodes and pods from the GKE cluster (endpoint from the GKE API, ADC token; "
        "default auto: when no nodes.json/pods.json and --location is known)",
    )
    group.add_argument(
        "--host-lookup",
        choices=modes,
        default=Mode.AUTO.value,
        help="resolve nodes' physical hosts via Compute Engine, then Cloud Monitoring "
        "(default auto: for nodes read live)",
    )
    group.add_argument(
        "--offline",
        action="store_true",
        help="never fall back to live readers; use files and explicitly named sources only",
    )
    group.add_argument(
        "--source-timeout",
        metavar="SECONDS",
        type=TIMEOUT_SECONDS,
        default=DEFAULT_SOURCE_TIMEOUT,
        help=f"timeout of each live request, {TIMEOUT_SECONDS.range} seconds "
        f"(default {DEFAULT_SOURCE_TIMEOUT:g})",
    )
    group.add_argument(
        "--max-log-entries",
        metavar="N",
        type=bounded_int(1, MAX_LOG_ENTRIES),
        default=DEFAULT_MAX_LOG_ENTRIES,
        help=f"log entries read live at most, 1 to {MAX_LOG_ENTRIES} "
        f"(default {DEFAULT_MAX_LOG_ENTRIES})",
    )


def add_auth_flags(group: argparse._ActionsContainer) -> None:
    """The --prometheus-url auth flags (diagnose and validate-queries)."""
    # Named after Prometheus' own scrape config: bearer_token_file, basic_auth.
    group.add_argument(
        "--prometheus-bearer-token-file",
        metavar="FILE",
        type=Path,
        help="send the token in FILE as 'Authorization: Bearer' to --prometheus-url",
    )
    group.add_argument(
        "--prometheus-username",
        metavar="NAME",
        help="basic auth to --prometheus-url as NAME (with --prometheus-password-file)",
    )
    group.add_argument(
        "--prometheus-password-file",
        metavar="FILE",
        type=Path,
        help="the basic-auth password, read from FILE (never give it on the command line)",
    )


def options_from_args(args: argparse.Namespace) -> SourceOptions:
    def mode(name: str) -> Mode:
        return Mode(getattr(args, name, None) or Mode.AUTO.value)

    options = SourceOptions(
        telemetry_dir=getattr(args, "telemetry", None),
        prometheus_url=getattr(args, "prometheus_url", None) or None,
        prometheus_cluster_label=getattr(args, "prometheus_cluster_label", None),
        **prometheus_auth_from_args(args),
        managed_prometheus=mode("managed_prometheus"),
        live_logs=mode("live_logs"),
        live_kube=mode("live_kube"),
        kubeconfig=getattr(args, "kubeconfig", None),
        kube_context=getattr(args, "kube_context", None),
        host_lookup=mode("host_lookup"),
        max_log_entries=getattr(args, "max_log_entries", DEFAULT_MAX_LOG_ENTRIES),
        timeout=getattr(args, "source_timeout", DEFAULT_SOURCE_TIMEOUT),
    )
    return options.offline() if getattr(args, "offline", False) else options


def prometheus_auth_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The SourceOptions auth fields from the flags, files read; InvalidInput if unusable."""
    token_file = getattr(args, "prometheus_bearer_token_file", None)
    username = getattr(args, "prometheus_username", None)
    password_file = getattr(args, "prometheus_password_file", None)
    if token_file is None and username is None and password_file is None:
        return {}
    if not getattr(args, "prometheus_url", None):
        raise InvalidInput("Prometheus auth flags need --prometheus-url")
    if token_file is not None and (username is not None or password_file is not None):
        raise InvalidInput(
            "--prometheus-bearer-token-file and --prometheus-username/--prometheus-password-file"
            " are exclusive: use one"
        )
    if token_file is not None:
        token = read_secret_file(token_file, f"--prometheus-bearer-token-file {token_file}")
        return {"prometheus_bearer_token": token}
    if username is None or password_file is None:
        raise InvalidInput(
            "basic auth needs both --prometheus-username and --prometheus-password-file"
        )
    password = read_secret_file(password_file, f"--prometheus-password-file {password_file}")
    return {"prometheus_basic_auth": (username, password)}


#: A secret file larger than this is no token or password (a wrong mount, a log file).
MAX_SECRET_FILE_BYTES = 64 * 1024


def read_secret_file(path: Path, what: str) -> str:
    """The stripped text of a token or password file; InvalidInput naming ``what`` otherwise.

    Kubernetes mounts each key of a Secret as a file holding the raw value; a trailing
    newline (``echo`` into a file) is not part of the secret.
    """
    try:
        if path.stat().st_size > MAX_SECRET_FILE_BYTES:
            raise InvalidInput(f"{what}: larger than {MAX_SECRET_FILE_BYTES} bytes")
        text = path.read_bytes().decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what}: not UTF-8 text") from exc
    except OSError as exc:
        raise InvalidInput(f"{what}: cannot read it ({exc.strerror or exc})") from exc
    if not text:
        raise InvalidInput(f"{what}: the file is empty")
    return text


def http_url(text: str) -> str:
    """An http(s) base URL with a host, no query and no fragment (paths are appended)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a valid URL: {text!r} ({exc})") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            f"not an http(s) URL with a host: {text!r} (e.g. http://127.0.0.1:9090)"
        )
    if parts.query or parts.fragment:
        raise argparse.ArgumentTypeError(
            f"{text!r} has a query or fragment; give the base URL only"
        )
    del port  # parsed only to reject an invalid one
    return text.rstrip("/")


_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def cluster_label_name(text: str) -> str:
    """A Prometheus label name, or ``none``."""
    if text == "none" or (_LABEL_NAME.match(text) and not text.startswith("__")):
        return text
    raise argparse.ArgumentTypeError(
        f"not a label name: {text!r} (e.g. cluster, cluster_name, or none)"
    )
