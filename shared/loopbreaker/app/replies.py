"""The reply of an HTTP entry point: status, JSON body, extra headers (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reply:
    status: int
    body: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> str:
        return json.dumps(self.body)
