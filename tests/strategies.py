"""Hypothesis strategies shared by the tests that feed the decoders anything."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

#: Scalars the json module writes and reads back unchanged.
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)


def json_values(
    *,
    scalars: st.SearchStrategy[Any] = SCALARS,
    keys: st.SearchStrategy[str] | None = None,
    max_size: int = 3,
    max_leaves: int = 10,
) -> st.SearchStrategy[Any]:
    """JSON values: ``scalars`` nested in lists and objects (keys drawn from ``keys``,
    any text by default)."""
    names = st.text() if keys is None else keys
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=max_size) | st.dictionaries(names, inner, max_size=max_size)
        ),
        max_leaves=max_leaves,
    )
