"""The run-time changes to the set of served models, kept across restarts.

The configured models (``--model``) are the starting set. A model added at run time
is remembered with its spec; a model removed at run time is remembered as removed
(``spec`` NULL), so that a configured model a user removed stays removed after a
restart. One row per model id: the latest decision about it wins.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jupyter_superfluid.store.db import Database


@dataclass(frozen=True)
class ServedModelRecord:
    """A run-time decision about one model id: served with ``spec``, or removed (None)."""

    id: str
    spec: str | None
    seq: int  # order of the decisions, oldest first


class ServedModelsMixin:
    """Served-model methods of ``Store``."""

    _db: Database
    _clock: Callable[[], float]

    def served_model_changes(self) -> list[ServedModelRecord]:
        """Every remembered decision, oldest first."""
        with self._db.read() as conn:
            rows = conn.execute("SELECT id, spec, seq FROM served_models ORDER BY seq").fetchall()
        return [ServedModelRecord(r["id"], r["spec"], r["seq"]) for r in rows]

    def remember_added_model(self, model_id: str, spec: str) -> None:
        """Remember that ``model_id`` is served with ``spec`` (durably)."""
        self._decide(model_id, spec)

    def remember_removed_model(self, model_id: str) -> None:
        """Remember that ``model_id`` is not served (durably)."""
        self._decide(model_id, None)

    def _decide(self, model_id: str, spec: str | None) -> None:
        with self._db.write() as conn:
            seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM served_models").fetchone()[0]
            conn.execute(
                "INSERT INTO served_models (id, spec, seq, updated_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(id) DO UPDATE SET spec = excluded.spec, seq = excluded.seq,"
                " updated_at = excluded.updated_at",
                (model_id, spec, seq, self._clock()),
            )
