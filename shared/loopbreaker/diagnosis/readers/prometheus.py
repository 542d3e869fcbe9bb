"""PromQL over the Prometheus HTTP API: any Prometheus, or Google Managed Prometheus.

Managed Prometheus serves the same API under
``https://monitoring.googleapis.com/v1/projects/PROJECT/location/global/prometheus`` and wants
an OAuth2 bearer token; a self-hosted Prometheus is just a base URL. One class covers both.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import quote

import requests

from loopbreaker.diagnosis.readers import QueryRejected, SourceUnreachable
from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
from loopbreaker.diagnosis.readers.retry import (
    DEFAULT_TIMEOUT,
    RetryPolicy,
    is_retryable_status,
    network_reason,
    parse_retry_after,
)
from loopbreaker.errors import SourceUnavailable
from loopbreaker.model import Sample, Series
from loopbreaker.timeutil import from_epoch

__all__ = [
    "GMP_ENDPOINT",
    "RAW_LOOKBACK",
    "PrometheusReader",
    "QueryRejected",
    "managed_prometheus_url",
]

GMP_ENDPOINT = "https://monitoring.googleapis.com"
#: How far before the window's start raw samples are read, so that the first increase inside
#: the window has a baseline; matches the ``[90m]`` of the ``*_raw`` templates.
RAW_LOOKBACK = timedelta(minutes=30)
#: Longest error text kept from a response body.
MAX_MESSAGE = 500

TokenProvider = Callable[[], str]


def managed_prometheus_url(project: str, endpoint: str = GMP_ENDPOINT) -> str:
    """Base URL of the Managed Prometheus API for ``project`` (location is always global)."""
    return (
        f"{endpoint.rstrip('/')}/v1/projects/{quote(project, safe='')}/location/global/prometheus"
    )


class PrometheusReader:
    """Reads PromQL results and raw samples from a Prometheus-compatible HTTP API."""

    def __init__(
        self,
        base_url: str,
        *,
        token_provider: TokenProvider | None = None,
        basic_auth: tuple[str, str] | None = None,
        session: requests.Session | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        source: str | None = None,
    ) -> None:
        """``token_provider`` (a bearer token) or ``basic_auth`` (username, password), as
        Prometheus' own scrape config has ``bearer_token_file`` or ``basic_auth``."""
        if token_provider is not None and basic_auth is not None:
            raise ValueError("a bearer token and basic auth are exclusive")
        self.base_url = base_url.rstrip("/")
        self._token_provider = token_provider
        # Built once into the header; neither it nor the password is ever logged or put
        # into an error (a 401/403 names the status and the server's own message only).
        self._basic = (
            "Basic " + base64.b64encode(f"{basic_auth[0]}:{basic_auth[1]}".encode()).decode()
            if basic_auth is not None
            else None
        )
        self._session = session or requests.Session()
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self._source = source or f"prometheus:{self.base_url}"

    @classmethod
    def managed(
        cls,
        project: str,
        *,
        credentials: GoogleCredentials | None = None,
        endpoint: str = GMP_ENDPOINT,
        **kwargs: Any,
    ) -> PrometheusReader:
        """Managed Service for Prometheus of ``project`` with a bearer token from ADC."""
        creds = credentials or GoogleCredentials()
        source = f"managed-prometheus:projects/{project}"
        return cls(
            managed_prometheus_url(project, endpoint),
            token_provider=lambda: creds.token(source),
            source=source,
            **kwargs,
        )

    @property
    def source(self) -> str:
        return self._source

    # --- queries ------------------------------------------------------------------------

    def query(self, promql: str, time: datetime | None = None) -> dict[str, Any]:
        """Instant query; returns the ``data`` object (``resultType`` and ``result``)."""
        params = {"query": promql}
        if time is not None:
            params["time"] = _epoch(time)
        data: dict[str, Any] = self._get("/api/v1/query", params)
        return data

    def query_range(
        self, promql: str, start: datetime, end: datetime, step: timedelta
    ) -> dict[str, Any]:
        """Range query; returns the ``data`` object (a matrix)."""
        params = {
            "query": promql,
            "start": _epoch(start),
            "end": _epoch(end),
            "step": f"{step.total_seconds():g}",
        }
        data: dict[str, Any] = self._get("/api/v1/query_range", params)
        return data

    def raw_series(self, selector: str, start: datetime, end: datetime) -> tuple[Series, ...]:
        """Every raw sample of ``selector`` in [start - RAW_LOOKBACK, end].

        An instant query of ``selector[Ns]`` at ``end`` returns stored samples unchanged (no
        step alignment, no staleness handling), which is what the offline files hold. Range
        bounds differ between Prometheus versions (closed vs left-open), so one extra second
        is read and the exact bounds applied here.
        """
        lower = start - RAW_LOOKBACK
        seconds = math.ceil((end - lower).total_seconds()) + 1
        data = self.query(f"{selector}[{seconds}s]", end)
        if data.get("resultType") != "matrix":
            raise self._malformed(f"expected a matrix, got {data.get('resultType')!r}")
        series = [_series(item, self._malformed) for item in _result_list(data, self._malformed)]
        out = []
        for one in series:
            kept = tuple(s for s in one.samples if lower <= s.at <= end)
            if kept:
                out.append(Series(one.metric, one.labels, kept))
        return tuple(out)

    def label_values(
        self, label: str, matches: tuple[str, ...], start: datetime, end: datetime
    ) -> tuple[str, ...]:
        """Values of ``label`` on the series of ``matches`` in [start, end]
        (``/api/v1/label/<label>/values``; ``__name__`` gives the metric names)."""
        return self._strings(f"/api/v1/label/{quote(label, safe='')}/values", matches, start, end)

    def label_names(
        self, matches: tuple[str, ...], start: datetime, end: datetime
    ) -> tuple[str, ...]:
        """Label names of the series of ``matches`` in [start, end] (``/api/v1/labels``)."""
        return self._strings("/api/v1/labels", matches, start, end)

    def _strings(
        self, path: str, matches: tuple[str, ...], start: datetime, end: datetime
    ) -> tuple[str, ...]:
        params: list[tuple[str, str]] = [("match[]", m) for m in matches]
        params += [("start", _epoch(start)), ("end", _epoch(end))]
        data: list[Any] = self._get(path, params, expect=list)
        if not all(isinstance(v, str) for v in data):
            raise self._malformed(f"{path}: data is not a list of strings")
        return tuple(data)

    # --- transport ----------------------------------------------------------------------

    def _get(
        self,
        path: str,
        params: Mapping[str, str] | list[tuple[str, str]],
        expect: type = dict,
    ) -> Any:
        url = self.base_url + path
        headers = {"Accept": "application/json"}
        if self._token_provider is not None:
            # A missing token is SourceUnavailable from the provider: never retried.
            headers["Authorization"] = f"Bearer {self._token_provider()}"
        elif self._basic is not None:
            headers["Authorization"] = self._basic
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._session.get(
                    url, params=params, headers=headers, timeout=self._timeout
                )
            except requests.ConnectTimeout as exc:
                # Nothing answers at all: every further query would wait as long.
                raise SourceUnreachable(
                    self.source, f"cannot connect to {self.base_url} within {self._timeout:g}s"
                ) from exc
            except requests.Timeout as exc:
                # A source that let one request time out would make every further one wait
                # as long: stop asking it in this run.
                raise SourceUnreachable(self.source, f"timed out after {self._timeout:g}s") from exc
            except requests.RequestException as exc:
                raise SourceUnreachable(
                    self.source, f"cannot reach {self.base_url}: {network_reason(exc)}"
                ) from exc
            status = response.status_code
            if is_retryable_status(status) and attempt < self._retry.attempts:
                delay = self._retry.delay(
                    attempt, parse_retry_after(response.headers.get("Retry-After"))
                )
                self._retry.sleep(delay)
                continue
            return self._decode(response, attempt, expect)

    def _decode(self, response: requests.Response, attempts: int, expect: type = dict) -> Any:
        status = response.status_code
        body = _json_or_none(response)
        if status in (401, 403):
            kind = "unauthenticated" if status == 401 else "permission denied"
            raise SourceUnreachable(
                self.source, f"HTTP {status} {kind}: {_message(body, response)}"
            )
        if status in (400, 422):
            error_type = body.get("errorType") if isinstance(body, dict) else None
            raise QueryRejected(
                self.source,
                f"HTTP {status} query rejected: {_message(body, response)}",
                status,
                error_type if isinstance(error_type, str) else None,
            )
        if status != 200:
            tries = f" after {attempts} attempts" if attempts > 1 else ""
            # Throttled or failing after every retry: later queries would only repeat the
            # wait, so the source is not asked again in this run.
            error = SourceUnreachable if is_retryable_status(status) else SourceUnavailable
            raise error(self.source, f"HTTP {status}{tries}: {_message(body, response)}")
        if not isinstance(body, dict):
            raise self._malformed(f"body is not a JSON object: {response.text[:120]!r}")
        if body.get("status") != "success":
            raise self._malformed(f"status {body.get('status')!r}: {_message(body, response)}")
        data = body.get("data")
        if not isinstance(data, expect):
            raise self._malformed(f"no data {expect.__name__}")
        return data

    def _malformed(self, detail: str) -> SourceUnavailable:
        return SourceUnavailable(self.source, f"malformed response: {detail}")


def _epoch(moment: datetime) -> str:
    return f"{moment.timestamp():.3f}"


def _json_or_none(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:  # requests' JSONDecodeError is a ValueError
        return None


def _message(body: Any, response: requests.Response) -> str:
    """The server's explanation: Prometheus ``error`` or Google ``error.message``."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, str) and error:
            return error[:MAX_MESSAGE]
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])[:MAX_MESSAGE]
    text = response.text.strip()
    return text[:MAX_MESSAGE] if text else response.reason or "no body"


def _result_list(
    data: Mapping[str, Any], malformed: Callable[[str], SourceUnavailable]
) -> list[Mapping[str, Any]]:
    result = data.get("result")
    if not isinstance(result, list) or not all(isinstance(i, Mapping) for i in result):
        raise malformed("result is not a list of objects")
    return result


def _series(item: Mapping[str, Any], malformed: Callable[[str], SourceUnavailable]) -> Series:
    metric = item.get("metric")
    values = item.get("values")
    if not isinstance(metric, Mapping) or not isinstance(values, list):
        raise malformed("matrix element without metric or values")
    labels = {str(k): str(v) for k, v in metric.items() if k != "__name__"}
    samples = []
    for pair in values:
        try:
            stamp, value = pair
            samples.append(Sample(from_epoch(float(stamp)), float(value)))
        except (TypeError, ValueError) as exc:
            raise malformed(f"bad sample {pair!r}") from exc
    samples.sort(key=lambda s: s.at)
    return Series(str(metric.get("__name__", "")), labels, tuple(samples))
