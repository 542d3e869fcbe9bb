"""Real Prometheus (back-filled with promtool) and Alertmanager servers on 127.0.0.1.

Also what feeds them from the kustomize package in deploy/prometheus: the package rendered
with the real ``kubectl kustomize``, and its AlertmanagerConfig turned into the
alertmanager.yml the prometheus-operator would generate from it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

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
    basic_auth: tuple[str, str] | None = None,
) -> PrometheusServer:
    """Back-fill ``openmetrics_files`` into a fresh TSDB, start Prometheus on it, wait ready.

    Blocks are only picked up at startup, hence back-fill first. Retention is 100y so that
    back-filled data dated far in the past is never deleted. ``config_yaml`` replaces the
    default config (no scrape targets), e.g. to add rule files or an Alertmanager.
    ``basic_auth`` (user, password) makes every endpoint require it (``--web.config.file``).
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
            if basic_auth is not None:
                web_config = workdir / "web.yml"
                web_config.write_text(basic_auth_web_config(*basic_auth))
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
        if basic_auth is not None:
            argv.append(f"--web.config.file={workdir / 'web.yml'}")
        argv.extend(extra_args)
        process = ManagedProcess("prometheus", argv, workdir)
        ready_url = f"http://{LOCALHOST}:{port}{prefix}/-/ready"
        probe = http_ok(ready_url) if basic_auth is None else _ok_with(ready_url, basic_auth)
        elapsed = process.wait_until(probe, f"ready at {ready_url}", timeout)
        return PrometheusServer(process, port, elapsed, prefix, data_dir)

    return retry_on_port_race(attempt)


def basic_auth_web_config(user: str, password: str) -> str:
    """A ``--web.config.file`` that lets ``user`` in with ``password``, nobody else.

    The format is Prometheus' (https://prometheus.io/docs/guides/basic-auth/):
    ``basic_auth_users`` maps each user to a bcrypt hash. The hash comes from the system's
    libcrypt (libxcrypt's ``crypt_gensalt("$2b$")``), so no bcrypt package is needed; cost 4,
    bcrypt's minimum, because Prometheus checks it on every request.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("crypt")
    if name is None:
        raise HarnessError("libcrypt not found: cannot hash a basic-auth password")
    lib = ctypes.CDLL(name)
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = lib.crypt_gensalt(b"$2b$", 4, None, 0)
    hashed = lib.crypt(password.encode(), salt) if salt else None
    if not hashed or not hashed.startswith(b"$2b$"):
        raise HarnessError("libcrypt cannot make bcrypt hashes")
    return yaml.safe_dump({"basic_auth_users": {user: hashed.decode()}})


def _ok_with(url: str, basic_auth: tuple[str, str]) -> Callable[[], bool]:
    """Probe that succeeds once ``url`` answers 200 to these basic-auth credentials."""
    import base64
    import urllib.error
    import urllib.request

    token = base64.b64encode(":".join(basic_auth).encode()).decode()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def probe() -> bool:
        request = urllib.request.Request(url, headers={"Authorization": f"Basic {token}"})
        try:
            with opener.open(request, timeout=2.0) as response:
                return bool(response.status == 200)
        except (OSError, ValueError):
            return False

    return probe


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


# --- kustomize -------------------------------------------------------------------------

KUSTOMIZE_TIMEOUT = 120.0


class _KubernetesYamlLoader(yaml.SafeLoader):
    """YAML as kubectl reads it: kustomize prints ``matchType: =`` unquoted, which YAML 1.1
    (PyYAML) would read as its "value" tag rather than the string ``=``."""


_KubernetesYamlLoader.add_constructor(
    "tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node)
)


def load_kubernetes_yaml(text: str) -> list[dict[str, Any]]:
    """The resources of a multi-document manifest, empty documents dropped."""
    return [doc for doc in yaml.load_all(text, Loader=_KubernetesYamlLoader) if doc]


def _kustomize_command() -> list[str]:
    # kubectl ships kustomize; a standalone kustomize works as well. Neither is a Debian
    # package, so there is nothing to install here.
    for name, args in (("kubectl", ["kustomize"]), ("kustomize", ["build"])):
        found = shutil.which(name)
        if found is None and os.access(f"/usr/bin/{name}", os.X_OK):
            found = f"/usr/bin/{name}"
        if found:
            return [found, *args]
    raise HarnessError("neither kubectl nor kustomize is installed: cannot render kustomizations")


def kustomize_build(directory: Path) -> list[dict[str, Any]]:
    """``kubectl kustomize DIRECTORY``: the resources a ``kubectl apply -k`` would send."""
    argv = [*_kustomize_command(), str(directory)]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=KUSTOMIZE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise HarnessError(f"{' '.join(argv)} timed out") from exc
    if done.returncode != 0:
        raise HarnessError(
            f"{' '.join(argv)} failed (exit {done.returncode}):\n{tail(done.stderr + done.stdout)}"
        )
    return load_kubernetes_yaml(done.stdout)


# --- AlertmanagerConfig -> alertmanager.yml ---------------------------------------------

#: The values of the Alertmanager's spec.alertmanagerConfigMatcherStrategy.type.
MATCHER_STRATEGIES = ("OnNamespace", "OnNamespaceExceptForAlertmanagerNamespace", "None")

_ROUTE_FIELDS = {
    "receiver",
    "matchers",
    "groupBy",
    "groupWait",
    "groupInterval",
    "repeatInterval",
    "continue",
    "routes",
    "muteTimeIntervals",
    "activeTimeIntervals",
}
_WEBHOOK_FIELDS = {"url", "urlSecret", "sendResolved", "httpConfig", "maxAlerts", "timeout"}


def _unsupported(where: str, given: Mapping[str, Any], known: set[str]) -> None:
    extra = sorted(set(given) - known)
    if extra:
        raise HarnessError(f"{where}: field(s) {extra} are not translated; extend the harness")


def _secret_value(secrets_dir: Path, selector: Mapping[str, Any], where: str) -> str:
    """A Secret key, with the Secret given as files ``secrets_dir/<name>/<key>``."""
    name, key = selector.get("name"), selector.get("key")
    if not name or not key:
        raise HarnessError(f"{where}: a secret key selector needs name and key, got {selector}")
    path = secrets_dir / str(name) / str(key)
    if not path.is_file():
        raise HarnessError(f"{where}: Secret {name!r} has no key {key!r} (no file {path})")
    return path.read_text()


def _matcher(matcher: Mapping[str, Any], where: str) -> str:
    _unsupported(where, matcher, {"name", "value", "matchType", "regex"})
    op = matcher.get("matchType") or ("=~" if matcher.get("regex") else "=")
    if op not in ("=", "!=", "=~", "!~"):
        raise HarnessError(f"{where}: matchType {op!r} is not one of =, !=, =~, !~")
    value = str(matcher.get("value", ""))
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return f'{matcher["name"]}{op}"{escaped}"'


def _route(route: Mapping[str, Any], prefix: str, where: str) -> dict[str, Any]:
    _unsupported(where, route, _ROUTE_FIELDS)
    if route.get("muteTimeIntervals") or route.get("activeTimeIntervals"):
        raise HarnessError(f"{where}: time intervals are not translated; extend the harness")
    out: dict[str, Any] = {}
    if route.get("receiver"):
        out["receiver"] = prefix + route["receiver"]
    for field, key in (
        ("groupBy", "group_by"),
        ("groupWait", "group_wait"),
        ("groupInterval", "group_interval"),
        ("repeatInterval", "repeat_interval"),
    ):
        if route.get(field):
            out[key] = route[field]
    matchers = [
        _matcher(m, f"{where}.matchers[{i}]") for i, m in enumerate(route.get("matchers", []))
    ]
    if matchers:
        out["matchers"] = matchers
    if route.get("continue"):
        out["continue"] = True
    children = [
        _route(child, prefix, f"{where}.routes[{i}]")
        for i, child in enumerate(route.get("routes", []))
    ]
    if children:
        out["routes"] = children
    return out


def _webhook(config: Mapping[str, Any], secrets_dir: Path, where: str) -> dict[str, Any]:
    _unsupported(where, config, _WEBHOOK_FIELDS)
    out: dict[str, Any] = {}
    if "urlSecret" in config:  # it takes precedence over url, as in the operator
        out["url"] = _secret_value(secrets_dir, config["urlSecret"], f"{where}.urlSecret").strip()
    elif "url" in config:
        out["url"] = config["url"]
    if not str(out.get("url", "")).startswith(("http://", "https://")):
        raise HarnessError(f"{where}: no valid url or urlSecret (got {out.get('url')!r})")
    if "sendResolved" in config:
        out["send_resolved"] = bool(config["sendResolved"])
    http_config = config.get("httpConfig") or {}
    _unsupported(f"{where}.httpConfig", http_config, {"authorization"})
    if "authorization" in http_config:
        authorization = http_config["authorization"]
        _unsupported(f"{where}.httpConfig.authorization", authorization, {"type", "credentials"})
        credentials = _secret_value(
            secrets_dir,
            authorization.get("credentials") or {},
            f"{where}.httpConfig.authorization.credentials",
        )
        # The operator writes the Secret's value into the generated configuration.
        out["http_config"] = {
            "authorization": {
                "type": authorization.get("type") or "Bearer",
                "credentials": credentials,
            }
        }
    if int(config.get("maxAlerts", 0)) > 0:
        out["max_alerts"] = int(config["maxAlerts"])
    if config.get("timeout"):
        out["timeout"] = config["timeout"]
    return out


def alertmanager_config_from_crds(
    resources: Sequence[Mapping[str, Any]],
    base: Mapping[str, Any],
    secrets_dir: Path,
    *,
    alertmanager_namespace: str,
    matcher_strategy: str = "OnNamespaceExceptForAlertmanagerNamespace",
) -> dict[str, Any]:
    """The alertmanager.yml the prometheus-operator generates from ``base`` (the chart's own
    configuration) and the AlertmanagerConfig resources among ``resources``.

    As the operator does it (pkg/alertmanager/amcfg.go): resources in namespace/name order;
    receiver names prefixed ``<namespace>/<name>/``; each resource's route becomes a child
    of the root route, before the base's own children, with ``continue: true`` forced and,
    depending on ``matcher_strategy``, a ``namespace="<its namespace>"`` matcher; Secret
    keys (files ``secrets_dir/<secret>/<key>``) written in as values. Webhook receivers
    only: any other field is an error rather than silently dropped.
    """
    if matcher_strategy not in MATCHER_STRATEGIES:
        raise HarnessError(f"matcher_strategy {matcher_strategy!r} not in {MATCHER_STRATEGIES}")
    config: dict[str, Any] = yaml.safe_load(yaml.safe_dump(dict(base)))
    config.setdefault("receivers", [])
    root = config.setdefault("route", {})
    found = [
        r
        for r in resources
        if r.get("kind") == "AlertmanagerConfig"
        and str(r.get("apiVersion", "")).startswith("monitoring.coreos.com/")
    ]
    found.sort(key=lambda r: (r["metadata"].get("namespace", ""), r["metadata"]["name"]))
    routes = []
    for resource in found:
        namespace = resource["metadata"].get("namespace")
        name = resource["metadata"]["name"]
        if not namespace:
            raise HarnessError(f"AlertmanagerConfig {name!r} has no namespace")
        where = f"AlertmanagerConfig {namespace}/{name}"
        spec = resource.get("spec") or {}
        _unsupported(where, spec, {"route", "receivers"})
        prefix = f"{namespace}/{name}/"
        for receiver in spec.get("receivers", []):
            _unsupported(f"{where} receiver", receiver, {"name", "webhookConfigs"})
            hooks = [
                _webhook(hook, secrets_dir, f"{where} receiver {receiver['name']}")
                for hook in receiver.get("webhookConfigs", [])
            ]
            converted: dict[str, Any] = {"name": prefix + receiver["name"]}
            if hooks:
                converted["webhook_configs"] = hooks
            config["receivers"].append(converted)
        if not spec.get("route"):
            continue
        route = _route(spec["route"], prefix, f"{where} route")
        enforce = matcher_strategy == "OnNamespace" or (
            matcher_strategy == "OnNamespaceExceptForAlertmanagerNamespace"
            and namespace != alertmanager_namespace
        )
        if enforce:
            route["matchers"] = [*route.get("matchers", []), f'namespace="{namespace}"']
        route["continue"] = True
        routes.append(route)
    root["routes"] = routes + list(root.get("routes", []))
    return config
