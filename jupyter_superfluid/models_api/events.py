"""The models event stream: a snapshot, then every change, resumable with Last-Event-ID.

A follower that gives no resume point (neither ``Last-Event-ID`` nor ``?after=``)
first gets one ``models.snapshot`` event (every model's state; its id is the last
event's), then each change as it happens (``model.added``, ``model.state``,
``model.progress``, ``model.removed``, each with the model's whole state). One that
resumes gets the changes after its id; when those are no longer kept, or the id is
from an earlier server (ids start from the server's start time, in milliseconds, so
they grow across restarts), it gets a fresh snapshot instead: a model's state is
always whole, so nothing is lost. ``keepalive`` events keep idle connections open.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from jupyter_superfluid.models.lifecycle import ModelLifecycle
from jupyter_superfluid.models.states import ModelEvent, ModelState
from jupyter_superfluid.web.sse import SSE

KEEPALIVE_S = 15.0


def model_object(state: ModelState, lifecycle: ModelLifecycle | None = None) -> dict[str, Any]:
    """A model's state as the models API answers it (with ``lifecycle``: a pool's replicas)."""
    answer = {"object": "superfluid.model", **state.as_dict()}
    loaded = lifecycle.loaded(state.id) if lifecycle is not None else None
    replicas = getattr(loaded.engine, "replicas", None) if loaded is not None else None
    if callable(replicas):  # a pool of remote replicas (engine/remote/pool.py)
        answer["replicas"] = replicas()
    return answer


def snapshot(lifecycle: ModelLifecycle, model: str | None = None) -> dict[str, Any]:
    """Every model's state (or one's), with the id of the last event it includes."""
    states = [s for s in lifecycle.states() if model is None or s.id == model]
    return {
        "type": "models.snapshot",
        "last_event_id": lifecycle.events.last_id,
        "data": [model_object(s, lifecycle) for s in states],
    }


def _event(event: ModelEvent) -> SSE:
    data = event.as_dict()
    data["model"] = {"object": "superfluid.model", **data["model"]}
    return SSE.json(data, event.type, event.id)


def _snapshot_event(lifecycle: ModelLifecycle, model: str | None) -> SSE:
    return SSE.json(snapshot(lifecycle, model), "models.snapshot", lifecycle.events.last_id)


async def follow(
    lifecycle: ModelLifecycle,
    after: int | None,
    model: str | None = None,
    *,
    keepalive_s: float = KEEPALIVE_S,
) -> AsyncGenerator[list[SSE], None]:
    """The stream's batches: a snapshot unless resuming, then the changes, until shutdown."""
    events = lifecycle.events
    pending = None if after is None else events.after(after)
    while True:
        if pending is None:  # nothing to resume from: start from the whole state
            yield [_snapshot_event(lifecycle, model)]
            after, pending = events.last_id, []
        if pending:
            after = pending[-1].id
            batch = [_event(e) for e in pending if model is None or e.model["id"] == model]
            if batch:
                yield batch
        if events.closed:
            return
        if not await events.wait(after or 0, keepalive_s):
            yield [SSE.json({"type": "keepalive", "last_event_id": events.last_id}, "keepalive")]
        pending = events.after(after or 0)
