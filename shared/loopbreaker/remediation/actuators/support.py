"""Cloud Support API v2 cases (google-cloud-support, REST transport, endpoint overridable)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loopbreaker.diagnosis.readers.google_auth import GoogleCredentials
from loopbreaker.errors import ActionFailed, SourceUnavailable

SOURCE = "cloudsupport:cases"
#: Used when LOOPBREAKER_SUPPORT_CLASSIFICATION is not set: the first classification found.
CLASSIFICATION_QUERY = 'display_name:"*Compute Engine*"'


class SupportApiCases:
    """:class:`~loopbreaker.remediation.actuators.SupportCases` on ``CaseServiceClient``."""

    def __init__(
        self,
        *,
        classification: str | None = None,
        api_endpoint: str | None = None,
        credentials: GoogleCredentials | None = None,
        test_case: bool = False,
    ) -> None:
        self._classification = classification
        self._endpoint = api_endpoint
        self._credentials = credentials or GoogleCredentials()
        self._test_case = test_case

    def _options(self) -> dict[str, Any]:
        options = {"api_endpoint": self._endpoint} if self._endpoint else None
        try:
            credentials = self._credentials.get(SOURCE)
        except SourceUnavailable as exc:
            raise ActionFailed(f"no credentials for the Support API: {exc.reason}") from exc
        return {
            "credentials": credentials,
            "client_options": options,
            "transport": "rest",
        }

    def create_case(self, parent: str, case: Mapping[str, Any]) -> str:
        from google.api_core import exceptions as gexc
        from google.cloud import support_v2

        try:
            classification = self._classification or self._find_classification()
            body = support_v2.Case(
                display_name=str(case["displayName"])[:250],
                description=str(case["description"]),
                classification=support_v2.CaseClassification(id=classification),
                priority=str(case.get("priority", "P2")),
                time_zone="UTC",
                test_case=self._test_case,
            )
            created = support_v2.CaseServiceClient(**self._options()).create_case(
                parent=parent, case=body, timeout=30.0
            )
        except gexc.GoogleAPICallError as exc:
            code = getattr(exc, "code", None)
            raise ActionFailed(
                f"cannot create the support case under {parent}: {exc.message}",
                status=int(code) if isinstance(code, int) else None,
            ) from exc
        except gexc.GoogleAPIError as exc:
            raise ActionFailed(f"cannot create the support case under {parent}: {exc}") from exc
        return str(created.name)

    def _find_classification(self) -> str:
        from google.cloud import support_v2

        client = support_v2.CaseServiceClient(**self._options())
        for found in client.search_case_classifications(
            request={"query": CLASSIFICATION_QUERY}, timeout=30.0
        ):
            return str(found.id)
        raise ActionFailed(
            "no case classification matches "
            f"{CLASSIFICATION_QUERY}; set LOOPBREAKER_SUPPORT_CLASSIFICATION"
        )
