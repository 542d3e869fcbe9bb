"""Cloud Logging reader: the workflow's LQL filters over the window, via google-cloud-logging.

Filters run in a fixed order so that the entry cap never starves the decisive ones:
node-pool and Compute system events, node faults, pod events, OOM kills, then the coordinator
(worker 0 of slice 0) before every other worker. The REST transport is used (not gRPC) so
that the same code path runs against a local fake in tests.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import requests

from loopbreaker.diagnosis.queries import scoped, templates_for
from loopbreaker.diagnosis.readers import LogReadResult, QueryRejected, SourceUnreachable
from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
from loopbreaker.diagnosis.readers.retry import DEFAULT_TIMEOUT, RetryPolicy, network_reason
from loopbreaker.errors import InvalidLogEntry, SourceUnavailable
from loopbreaker.model import Context, QueryLanguage, Signal
from loopbreaker.signals.classify import classify

#: Entries read per diagnosis, over all filters; a chatty job cannot make a run unbounded.
DEFAULT_MAX_ENTRIES = 2000
#: Entries asked for per API page.
DEFAULT_PAGE_SIZE = 500
#: The LQL templates run, in this order (coordinator before the other workers).
LOG_QUERY_ORDER = (
    "restart_events",
    "nodepool_logs",
    "system_events",
    "node_fault_logs",
    "scheduling_events",
    "capacity_audit",
    "autoscaler_visibility",
    "oom_audit",
    "coordinator_logs",
    "worker_logs",
    # Last: the gauge usually counts JobSet restarts; these catch what it leaves out.
    "jobset_restart_events",
)


class CloudLoggingReader:
    """Reads and classifies the log entries of a diagnosis window."""

    def __init__(
        self,
        project: str,
        *,
        credentials: GoogleCredentials | None = None,
        api_endpoint: str | None = None,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        page_size: int = DEFAULT_PAGE_SIZE,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy | None = None,
        query_ids: Sequence[str] = LOG_QUERY_ORDER,
    ) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be positive")
        self.project = project
        self._credentials = credentials or GoogleCredentials()
        self._api_endpoint = api_endpoint
        self._max_entries = max_entries
        self._page_size = page_size
        self._timeout = timeout
        self._retry = retry or RetryPolicy()
        self._query_ids = tuple(query_ids)
        self._client: Any = None

    @property
    def source(self) -> str:
        return f"cloud-logging:projects/{self.project}"

    # --- the workflow read --------------------------------------------------------------

    def filters(self, context: Context) -> list[tuple[str, str]]:
        """(query id, filled LQL) in reading order."""
        by_id = {
            t.id: t for t in templates_for(context.workload_kind) if t.language is QueryLanguage.LQL
        }
        ctx = replace(context, project=self.project)
        return [(qid, scoped(by_id[qid].text, ctx)) for qid in self._query_ids if qid in by_id]

    def read(self, context: Context) -> LogReadResult:
        """Run every filter; raise SourceUnavailable only when none could be read."""
        seen: set[tuple[str, str, str]] = set()
        signals: list[Signal] = []
        rejected: list[tuple[str, str]] = []
        failures: list[tuple[str, str]] = []
        succeeded = 0
        read = 0
        truncated = False
        filters = self.filters(context)
        for index, (qid, text) in enumerate(filters):
            budget = self._max_entries - read
            if budget <= 0:
                truncated = True
                break
            try:
                entries = self._list_with_retry(text, budget)
            except SourceUnreachable as exc:
                # Auth and network failures hit every filter alike: stop asking.
                failures.append((qid, exc.reason))
                failures.extend((q, "not read: " + exc.reason) for q, _ in filters[index + 1 :])
                break
            except SourceUnavailable as exc:
                failures.append((qid, exc.reason))
                continue
            succeeded += 1
            read += len(entries)
            if len(entries) >= budget:
                truncated = True
            for entry in entries:
                key = entry_key(entry)
                if key in seen and key[0]:
                    continue
                seen.add(key)
                try:
                    signals.append(classify(entry))
                except InvalidLogEntry as exc:
                    rejected.append((f"{qid}:{key[0] or '?'}", str(exc)))
        if succeeded == 0:
            reason = "; ".join(f"{qid}: {why}" for qid, why in failures[:1]) or "no filters"
            raise SourceUnavailable(self.source, reason) from None
        return LogReadResult(
            signals=tuple(signals),
            entries_read=read,
            failures=tuple(failures),
            truncated=truncated,
            rejected=tuple(rejected),
        )

    def read_one(self, text: str) -> int:
        """Read at most one entry of ``text``: 0 or 1. For query validation."""
        return len(self._list_with_retry(text, 1))

    # --- transport ----------------------------------------------------------------------

    def _list_with_retry(self, text: str, limit: int) -> list[dict[str, Any]]:
        from google.api_core import exceptions as gexc

        attempt = 0
        while True:
            attempt += 1
            try:
                return list(self._list(text, limit))
            except (gexc.Unauthorized, gexc.Forbidden) as exc:
                raise SourceUnreachable(
                    self.source, f"HTTP {exc.code} {_api_message(exc)}"
                ) from exc
            except gexc.BadRequest as exc:
                raise QueryRejected(
                    self.source, f"filter rejected: {_api_message(exc)}", 400
                ) from exc
            except (gexc.TooManyRequests, gexc.ServerError) as exc:
                if attempt >= self._retry.attempts:
                    raise SourceUnavailable(
                        self.source,
                        f"HTTP {exc.code} after {attempt} attempts: {_api_message(exc)}",
                    ) from exc
                self._retry.sleep(self._retry.delay(attempt))
            except gexc.GoogleAPICallError as exc:
                raise SourceUnavailable(
                    self.source, f"HTTP {exc.code}: {_api_message(exc)}"
                ) from exc
            except requests.ConnectTimeout as exc:
                raise SourceUnreachable(
                    self.source, f"cannot connect to Cloud Logging within {self._timeout:g}s"
                ) from exc
            except requests.Timeout as exc:
                # One filter timing out means the next would wait as long: stop, as the
                # other readers do, so a diagnosis never waits once per filter.
                raise SourceUnreachable(self.source, f"timed out after {self._timeout:g}s") from exc
            except ValueError as exc:
                # A body that is not JSON; requests' JSONDecodeError is also a
                # RequestException, hence this clause comes first.
                raise SourceUnavailable(self.source, f"malformed response: {exc}") from exc
            except requests.RequestException as exc:
                raise SourceUnreachable(
                    self.source, f"cannot reach Cloud Logging: {network_reason(exc)}"
                ) from exc

    def _list(self, text: str, limit: int) -> Iterator[dict[str, Any]]:
        """Page ``entries:list`` through the library's authenticated connection.

        ``Client.list_entries`` is not used: turning each entry into an object creates a
        Logger per log name, and each Logger probes the GCE metadata server (seconds of
        stall off GCE). The raw v2 JSON is also exactly what ``classify`` reads.
        """
        connection = self._get_client()._connection
        body: dict[str, Any] = {
            "resourceNames": [f"projects/{self.project}"],
            "filter": text,
            "orderBy": "timestamp asc",
            "pageSize": min(self._page_size, limit),
        }
        returned = 0
        while True:
            page = connection.api_request(
                method="POST", path="/entries:list", data=body, timeout=self._timeout
            )
            if not isinstance(page, dict):
                raise ValueError(f"entries:list returned {type(page).__name__}, not an object")
            entries = page.get("entries", [])
            if not isinstance(entries, list):
                raise ValueError("entries is not a list")
            for entry in entries:
                if returned >= limit:
                    return
                if isinstance(entry, dict):
                    returned += 1
                    yield entry
            token = page.get("nextPageToken")
            if not token or returned >= limit:
                return
            body["pageToken"] = token
            body["pageSize"] = min(self._page_size, limit - returned)

    def _get_client(self) -> Any:
        if self._client is None:
            from google.auth.transport.requests import AuthorizedSession
            from google.cloud import logging as cloud_logging

            credentials = self._credentials.get(self.source)
            options = {"api_endpoint": self._api_endpoint} if self._api_endpoint else None
            # AuthorizedSession refreshes the token and replays a request answered 401 by
            # default: that is the auth retry the workflow forbids.
            session = AuthorizedSession(  # type: ignore[no-untyped-call]
                credentials, refresh_status_codes=()
            )
            self._client = cloud_logging.Client(  # type: ignore[no-untyped-call]
                project=self.project,
                credentials=credentials,
                client_options=options,
                _http=session,
                _use_grpc=False,
            )
        return self._client


def _api_message(exc: Any) -> str:
    """The server's message without the "POST https://...: " prefix api_core adds."""
    message = str(getattr(exc, "message", None) or exc)
    method, _, rest = message.partition(" ")
    if method in ("GET", "POST") and ": " in rest:
        message = rest.split(": ", 1)[1]
    return message[:500]


def entry_key(entry: Mapping[str, Any]) -> tuple[str, str, str]:
    """The de-duplication key of a LogEntry: (insertId, logName, timestamp)."""
    return (
        str(entry.get("insertId", "")),
        str(entry.get("logName", "")),
        str(entry.get("timestamp", "")),
    )
