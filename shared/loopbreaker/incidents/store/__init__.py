"""Incident stores: the port in :mod:`.base`, SQLite and Firestore adapters beside it.

Adapters are imported by :mod:`loopbreaker.app.bootstrap` only when chosen, so the Firestore
client library is never loaded by local runs.
"""

from loopbreaker.incidents.store.base import Change, IncidentStore, IngestResult, UpdateResult

__all__ = ["Change", "IncidentStore", "IngestResult", "UpdateResult"]
