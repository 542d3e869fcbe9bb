"""Kubernetes nodes and pods through the official client: from a kubeconfig, or from GKE.

For GKE the cluster endpoint and CA come from the GKE API
(``container.googleapis.com/v1/projects/P/locations/L/clusters/C``) and the bearer token from
Application Default Credentials, as ``gcloud container clusters get-credentials`` would set up.
Objects are read as raw JSON (``_preload_content=False``) and mapped by
:mod:`loopbreaker.diagnosis.kube_objects`, the same code that reads ``kubectl get -o json`` files.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from loopbreaker.diagnosis import trainjobs
from loopbreaker.diagnosis.jobsets import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION, jobset_info
from loopbreaker.diagnosis.kube_objects import node_info, pod_info
from loopbreaker.diagnosis.readers import SourceUnreachable
from loopbreaker.diagnosis.readers.retry import (
    DEFAULT_TIMEOUT,
    RetryPolicy,
    is_retryable_status,
    network_reason,
    parse_retry_after,
)
from loopbreaker.errors import ConfigError, SourceUnavailable
from loopbreaker.model import NodeInfo, PodInfo, Signal
from loopbreaker.model.evidence import JobSetInfo

GKE_ENDPOINT = "https://container.googleapis.com"
#: Objects per list page; big clusters are read in several pages (``continue`` tokens).
DEFAULT_PAGE_LIMIT = 500
#: Objects read per kind at most; a runaway cluster cannot make a diagnosis unbounded.
DEFAULT_MAX_OBJECTS = 20000

TokenProvider = Callable[[], str]


class KubernetesReader:
    """Lists nodes and pods with ``kubernetes.client.CoreV1Api``, JobSets with
    ``CustomObjectsApi``."""

    def __init__(
        self,
        api_client: Any,
        *,
        source: str,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        page_limit: int = DEFAULT_PAGE_LIMIT,
        max_objects: int = DEFAULT_MAX_OBJECTS,
    ) -> None:
        self._api_client = api_client
        self._source = source
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self._page_limit = page_limit
        self._max_objects = max_objects

    @property
    def source(self) -> str:
        return self._source

    @property
    def api_client(self) -> Any:
        """The configured ``kubernetes.client.ApiClient`` (the actuators reuse it)."""
        return self._api_client

    # --- construction -------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls, path: str | Path, *, context: str | None = None, **kwargs: Any
    ) -> KubernetesReader:
        """A reader for the cluster a kubeconfig file points at. Bad files are bad input."""
        import yaml
        from kubernetes import client, config

        path = Path(path).expanduser()
        if not path.is_file():
            raise ConfigError(f"kubeconfig {path} does not exist")
        configuration = client.Configuration()
        try:
            config.load_kube_config(
                config_file=str(path), context=context, client_configuration=configuration
            )
        except (config.ConfigException, yaml.YAMLError) as exc:
            raise ConfigError(f"kubeconfig {path}: {_first_line(exc)}") from exc
        _no_library_retries(configuration)
        label = f"kubernetes:kubeconfig={path}" + (f"@{context}" if context else "")
        return cls(client.ApiClient(configuration), source=label, **kwargs)

    @classmethod
    def from_gke(
        cls,
        project: str,
        location: str,
        cluster: str,
        *,
        token_provider: TokenProvider,
        container_endpoint: str = GKE_ENDPOINT,
        session: requests.Session | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        **kwargs: Any,
    ) -> KubernetesReader:
        """A reader for a GKE cluster: endpoint and CA from the GKE API, token from ADC."""
        from kubernetes import client

        source = f"kubernetes:gke/projects/{project}/locations/{location}/clusters/{cluster}"
        token = token_provider()
        endpoint, ca_pem = _gke_endpoint(
            session or requests.Session(),
            f"{container_endpoint.rstrip('/')}/v1/projects/{quote(project, safe='')}"
            f"/locations/{quote(location, safe='')}/clusters/{quote(cluster, safe='')}",
            token,
            timeout,
            source,
        )
        configuration = client.Configuration()
        configuration.host = endpoint if "://" in endpoint else f"https://{endpoint}"
        configuration.ssl_ca_cert = _temp_ca_file(ca_pem)
        configuration.api_key = {"authorization": token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        _no_library_retries(configuration)
        return cls(client.ApiClient(configuration), source=source, timeout=timeout, **kwargs)

    # --- reads --------------------------------------------------------------------------

    def nodes(self) -> tuple[NodeInfo, ...]:
        api = self._core()
        items = self._list_all(api.list_node, "nodes")
        return tuple(n for n in (node_info(i) for i in items) if n is not None)

    def pods(self, namespace: str | None) -> tuple[PodInfo, ...]:
        api = self._core()
        if namespace:
            items = self._list_all(
                lambda **kw: api.list_namespaced_pod(namespace, **kw), f"pods in {namespace}"
            )
        else:
            items = self._list_all(api.list_pod_for_all_namespaces, "pods")
        return tuple(p for p in (pod_info(i) for i in items) if p is not None)

    def trainjobs(self, namespace: str | None) -> tuple[Signal, ...]:
        """Kubeflow Trainer v2 TrainJobs (``/apis/trainer.kubeflow.org/v1alpha1/...``) as
        the signals :mod:`loopbreaker.diagnosis.trainjobs` makes of them."""
        from kubernetes import client

        api = client.CustomObjectsApi(self._api_client)
        where = (trainjobs.GROUP, trainjobs.VERSION)
        if namespace:
            items = self._list_all(
                _no_resource_is_empty(
                    lambda **kw: api.list_namespaced_custom_object(
                        *where, namespace, trainjobs.PLURAL, **kw
                    )
                ),
                f"trainjobs in {namespace}",
            )
        else:
            items = self._list_all(
                _no_resource_is_empty(
                    lambda **kw: api.list_cluster_custom_object(*where, trainjobs.PLURAL, **kw)
                ),
                "trainjobs",
            )
        # Every item listed here is a TrainJob, whether or not the item repeats its kind.
        return tuple(s for i in items for s in trainjobs.trainjob_signals(i, self._source))

    def jobsets(self, namespace: str | None) -> tuple[JobSetInfo, ...] | None:
        """JobSets (``jobset.x-k8s.io/v1alpha2``, the only served version from v0.2 to
        v0.12) through ``CustomObjectsApi``: the same JSON ``kubectl get jobsets`` prints.
        None when the API server serves no such resource (the JobSet CRD is not installed)."""
        from kubernetes import client

        api = client.CustomObjectsApi(self._api_client)
        group, version, plural = JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL
        served = _Served()
        if namespace:
            items = self._list_all(
                served.watch(
                    lambda **kw: api.list_namespaced_custom_object(
                        group, version, namespace, plural, **kw
                    )
                ),
                f"jobsets in {namespace}",
            )
        else:
            items = self._list_all(
                served.watch(
                    lambda **kw: api.list_cluster_custom_object(group, version, plural, **kw)
                ),
                "jobsets",
            )
        if not served.yes:
            return None
        return tuple(j for j in (jobset_info(i) for i in items) if j is not None)

    def _core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self._api_client)

    def _list_all(self, call: Callable[..., Any], what: str) -> list[dict[str, Any]]:
        token: str | None = None
        count = 0
        items: list[dict[str, Any]] = []
        while True:
            page = self._page(call, what, token)
            for item in page.get("items") or ():
                if isinstance(item, dict):
                    items.append(item)
                    count += 1
            metadata = page.get("metadata")
            token = metadata.get("continue") if isinstance(metadata, dict) else None
            if not token or count >= self._max_objects:
                return items[: self._max_objects]

    def _page(self, call: Callable[..., Any], what: str, token: str | None) -> dict[str, Any]:
        import urllib3
        from kubernetes.client.exceptions import ApiException

        kwargs: dict[str, Any] = {
            "limit": self._page_limit,
            "_preload_content": False,
            # A (connect, read) tuple: the client silently ignores a float timeout.
            "_request_timeout": (self._timeout, self._timeout),
        }
        if token:
            kwargs["_continue"] = token
        attempt = 0
        while True:
            attempt += 1
            try:
                response = call(**kwargs)
                body = response.data
                break
            except ApiException as exc:
                status = int(exc.status or 0)
                if is_retryable_status(status) and attempt < self._retry.attempts:
                    headers = exc.headers or {}
                    retry_after = parse_retry_after(headers.get("Retry-After"))
                    self._retry.sleep(self._retry.delay(attempt, retry_after))
                    continue
                error = SourceUnreachable if status in (0, 401, 403) else SourceUnavailable
                raise error(self._source, _api_error(exc, what, attempt)) from exc
            except urllib3.exceptions.ConnectTimeoutError as exc:
                raise SourceUnreachable(
                    self._source,
                    f"cannot connect to the API server within {self._timeout:g}s",
                ) from exc
            except urllib3.exceptions.TimeoutError as exc:
                raise SourceUnreachable(
                    self._source, f"listing {what} timed out after {self._timeout:g}s"
                ) from exc
            except urllib3.exceptions.HTTPError as exc:
                raise SourceUnreachable(
                    self._source,
                    f"cannot reach the API server listing {what}: {network_reason(exc)}",
                ) from exc
        try:
            page = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SourceUnavailable(
                self._source, f"malformed response listing {what}: {exc}"
            ) from exc
        if not isinstance(page, dict):
            raise SourceUnavailable(self._source, f"malformed response listing {what}: not a List")
        return page


class _EmptyList:
    data = b'{"items": []}'


class _Served:
    """Notes whether a list call found its resource (a 404 on a collection: not served)."""

    def __init__(self) -> None:
        self.yes = True

    def watch(self, call: Callable[..., Any]) -> Callable[..., Any]:
        empty = _no_resource_is_empty(call)

        def run(**kwargs: Any) -> Any:
            page = empty(**kwargs)
            if isinstance(page, _EmptyList):
                self.yes = False
            return page

        return run


def _no_resource_is_empty(call: Callable[..., Any]) -> Callable[..., Any]:
    """A 404 on a collection means the API server serves no such resource (the Trainer's
    CRD is not installed): there is none of it, which is known, not unreadable."""

    def run(**kwargs: Any) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return call(**kwargs)
        except ApiException as exc:
            if int(exc.status or 0) == 404:
                return _EmptyList()
            raise

    return run


def _api_error(exc: Any, what: str, attempts: int) -> str:
    status = int(exc.status or 0)
    message = exc.reason or ""
    with contextlib.suppress(ValueError, TypeError):
        body = json.loads(exc.body or "")
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            message = body["message"]
    if status == 0:  # TLS failures arrive as status 0
        return f"cannot connect to list {what}: {str(message).strip()[:300]}"
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return f"HTTP {status} listing {what}{tries}: {str(message)[:300]}"


def _no_library_retries(configuration: Any) -> None:
    # urllib3 would otherwise retry reads three times on its own: a timed-out list would
    # cost four timeouts, and our RetryPolicy already handles 429/5xx.
    configuration.retries = False


def _gke_endpoint(
    session: requests.Session, url: str, token: str, timeout: float, source: str
) -> tuple[str, bytes]:
    try:
        response = session.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
    except requests.Timeout as exc:
        raise SourceUnavailable(source, f"GKE API timed out after {timeout:g}s") from exc
    except requests.RequestException as exc:
        raise SourceUnreachable(source, f"cannot reach the GKE API: {network_reason(exc)}") from exc
    if response.status_code != 200:
        raise SourceUnavailable(
            source, f"GKE API HTTP {response.status_code}: {response.text.strip()[:300]}"
        )
    try:
        cluster = response.json()
        endpoint = cluster["endpoint"]
        ca_pem = base64.b64decode(cluster["masterAuth"]["clusterCaCertificate"], validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise SourceUnavailable(source, f"GKE API malformed cluster: {exc!r}") from exc
    if not isinstance(endpoint, str) or not endpoint:
        raise SourceUnavailable(source, "GKE API cluster has no endpoint")
    return endpoint, ca_pem


def _temp_ca_file(ca_pem: bytes) -> str:
    """The kubernetes client wants the CA as a file; it is removed at exit."""
    handle, path = tempfile.mkstemp(prefix="loopbreaker-gke-ca-", suffix=".pem")
    with os.fdopen(handle, "wb") as out:
        out.write(ca_pem)
    atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
