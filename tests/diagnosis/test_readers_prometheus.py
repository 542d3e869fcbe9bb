"""PrometheusReader against a fake Managed Prometheus endpoint and a real Prometheus."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fakes import RecordingSleep
from fakeservers import Fault, ManagedPrometheusProxy
from harness.fixtures import PrometheusFactory

from loopbreaker.diagnosis.readers import SourceUnreachable
from loopbreaker.diagnosis.readers.prometheus import (
    PrometheusReader,
    QueryRejected,
    managed_prometheus_url,
)
from loopbreaker.diagnosis.readers.retry import RetryPolicy
from loopbreaker.diagnosis.telemetry import parse_openmetrics
from loopbreaker.errors import SourceUnavailable
from loopbreaker.model import Sample, Series

T0 = datetime(2026, 5, 20, 8, 15, tzinfo=UTC)
START, END = T0 - timedelta(minutes=30), T0 + timedelta(minutes=30)
SELECTOR = 'kube_jobset_restarts{cluster="c", jobset_name="w"}'
RAW = f"{SELECTOR}[5401s]"  # [start - 30m, end] = 90 minutes, plus one second
TOKEN = "test-token"


@pytest.fixture
def gmp() -> Iterator[ManagedPrometheusProxy]:
    with ManagedPrometheusProxy(token=TOKEN, project="P") as server:
        yield server


def reader(server: ManagedPrometheusProxy, sleep: RecordingSleep | None = None) -> PrometheusReader:
    return PrometheusReader(
        server.prefix(),
        token_provider=lambda: TOKEN,
        timeout=0.3,
        retry=RetryPolicy(attempts=3, base_delay=0.25, sleep=sleep or RecordingSleep()),
    )


def _matrix(*values: tuple[float, str]) -> dict[str, object]:
    return {
        "resultType": "matrix",
        "result": [
            {
                "metric": {"__name__": "kube_jobset_restarts", "cluster": "c", "jobset_name": "w"},
                "values": [list(v) for v in values],
            }
        ],
    }


def test_managed_url_shape() -> None:
    assert managed_prometheus_url("my-proj") == (
        "https://monitoring.googleapis.com/v1/projects/my-proj/location/global/prometheus"
    )


def test_raw_series_sends_bearer_and_keeps_only_window_samples(gmp: ManagedPrometheusProxy) -> None:
    lower = START - timedelta(minutes=30)
    gmp.answers[RAW] = _matrix(
        (lower.timestamp() - 1, "0"),  # outside: the extra second read for version safety
        (lower.timestamp(), "1"),
        (T0.timestamp(), "2"),
        (END.timestamp(), "3"),
    )
    series = reader(gmp).raw_series(SELECTOR, START, END)
    assert series == (
        Series(
            "kube_jobset_restarts",
            {"cluster": "c", "jobset_name": "w"},
            (Sample(lower, 1.0), Sample(T0, 2.0), Sample(END, 3.0)),
        ),
    )
    (request,) = gmp.requests
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.param("query") == RAW
    assert float(request.param("time") or 0) == END.timestamp()


def test_query_returns_data(gmp: ManagedPrometheusProxy) -> None:
    gmp.answers["up"] = {"resultType": "vector", "result": []}
    assert reader(gmp).query("up", T0) == {"resultType": "vector", "result": []}


@pytest.mark.parametrize("fault", [Fault.FORBIDDEN, Fault.UNAUTHORIZED])
def test_auth_errors_are_not_retried(gmp: ManagedPrometheusProxy, fault: Fault) -> None:
    gmp.inject(fault, times=5)
    sleep = RecordingSleep()
    with pytest.raises(SourceUnavailable, match=f"HTTP {fault.value}") as info:
        reader(gmp, sleep).raw_series(SELECTOR, START, END)
    assert "injected fault" in info.value.reason  # the server's own message is kept
    assert len(gmp.requests) == 1
    assert sleep.calls == []


def test_missing_token_is_401(gmp: ManagedPrometheusProxy) -> None:
    anonymous = PrometheusReader(gmp.prefix(), timeout=0.3)
    with pytest.raises(SourceUnavailable, match="401 unauthenticated"):
        anonymous.query("up")


@pytest.mark.parametrize("fault", [Fault.TOO_MANY_REQUESTS, Fault.SERVER_ERROR, Fault.UNAVAILABLE])
def test_throttling_and_server_errors_are_retried_with_backoff(
    gmp: ManagedPrometheusProxy, fault: Fault
) -> None:
    gmp.inject(fault, times=2)
    gmp.answers[RAW] = _matrix((T0.timestamp(), "4"))
    sleep = RecordingSleep()
    series = reader(gmp, sleep).raw_series(SELECTOR, START, END)
    assert series[0].samples == (Sample(T0, 4.0),)
    assert len(gmp.requests) == 3
    # 429 carries Retry-After: 0, honoured; 5xx back off exponentially.
    assert sleep.calls == ([0.0, 0.0] if fault is Fault.TOO_MANY_REQUESTS else [0.25, 0.5])


def test_retries_are_bounded(gmp: ManagedPrometheusProxy) -> None:
    gmp.inject(Fault.SERVER_ERROR, times=10)
    with pytest.raises(SourceUnavailable, match="HTTP 500 after 3 attempts"):
        reader(gmp).query("up")
    assert len(gmp.requests) == 3


def test_timeout_is_unavailable_without_retry(gmp: ManagedPrometheusProxy) -> None:
    gmp.inject(Fault.TIMEOUT)
    with pytest.raises(SourceUnavailable, match="timed out after 0.3s"):
        reader(gmp).query("up")
    assert len(gmp.requests) == 1


def test_connection_reset_is_network_error(gmp: ManagedPrometheusProxy) -> None:
    gmp.inject(Fault.RESET)
    with pytest.raises(
        SourceUnavailable, match="cannot reach .*: Remote end closed connection without response"
    ):
        reader(gmp).query("up")


def test_nothing_listening_is_network_error(gmp: ManagedPrometheusProxy) -> None:
    url = gmp.prefix()
    gmp.stop()
    with pytest.raises(SourceUnreachable, match="cannot reach .*: Connection refused"):
        PrometheusReader(url, timeout=0.3).query("up")


def test_malformed_json(gmp: ManagedPrometheusProxy) -> None:
    gmp.inject(Fault.MALFORMED)
    with pytest.raises(SourceUnavailable, match="malformed response: body is not a JSON object"):
        reader(gmp).query("up")


def test_unexpected_result_type_is_malformed(gmp: ManagedPrometheusProxy) -> None:
    gmp.answers["up[5401s]"] = {"resultType": "vector", "result": []}
    with pytest.raises(SourceUnavailable, match="expected a matrix"):
        reader(gmp).raw_series("up", START, END)


def test_bad_query_is_rejected_with_server_message(gmp: ManagedPrometheusProxy) -> None:
    gmp.bad_queries["sum("] = "parse error: unclosed left parenthesis"
    with pytest.raises(QueryRejected, match="unclosed left parenthesis") as info:
        reader(gmp).query("sum(")
    assert info.value.status == 400
    assert info.value.error_type == "bad_data"
    assert len(gmp.requests) == 1


def test_token_provider_failure_sends_nothing(gmp: ManagedPrometheusProxy) -> None:
    def no_token() -> str:
        raise SourceUnavailable("google-auth", "no Application Default Credentials")

    broken = PrometheusReader(gmp.prefix(), token_provider=no_token, timeout=0.3)
    with pytest.raises(SourceUnavailable, match="no Application Default Credentials"):
        broken.query("up")
    assert gmp.requests == []


# --- a real Prometheus -----------------------------------------------------------------

OPENMETRICS = """\
# TYPE kube_jobset_restarts gauge
kube_jobset_restarts{cluster="c",jobset_name="w",namespace="ns"} 0 {t0}
kube_jobset_restarts{cluster="c",jobset_name="w",namespace="ns"} 1 {t1}
kube_jobset_restarts{cluster="c",jobset_name="w",namespace="ns"} 3 {t2}
kube_jobset_restarts{cluster="c",jobset_name="other",namespace="ns"} 7 {t1}
# EOF
"""


def test_raw_series_equals_the_openmetrics_file(
    prometheus_factory: PrometheusFactory, tmp_path: Path
) -> None:
    stamps = [START - timedelta(minutes=30), T0, END]
    text = OPENMETRICS
    for i, stamp in enumerate(stamps):
        text = text.replace(f"{{t{i}}}", str(int(stamp.timestamp())))
    path = tmp_path / "metrics.om"
    path.write_text(text)
    prom = prometheus_factory([path], route_prefix="/v1/projects/P/location/global/prometheus")
    live = PrometheusReader(prom.url, timeout=10).raw_series(SELECTOR, START, END)
    offline = [
        s for s in parse_openmetrics(text)["kube_jobset_restarts"] if s.labels["jobset_name"] == "w"
    ]
    assert list(live) == offline
