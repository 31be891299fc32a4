"""Which models are served, and what of each is on disk (blocking helpers, quick).

``served_specs`` rebuilds the served set at start: the configured specs, with the
models added or removed at run time that the store remembers. ``initial_state`` is
where a model is before anything happens to it: ``available`` when its files are
here, ``not_downloaded`` (with the bytes of an unfinished download) when some hub
file is missing, ``failed`` for a path that does not exist.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

from jupyter_superfluid.models.hub_cache import HubFile, cached_file, delete_cached, partial_bytes
from jupyter_superfluid.models.registry import ModelSpec, hub_files, parse_spec
from jupyter_superfluid.models.states import ModelState, Origin, Progress
from jupyter_superfluid.store import ServedModelRecord

log = logging.getLogger(__name__)


def served_specs(
    configured: Sequence[str], changes: Iterable[ServedModelRecord]
) -> tuple[list[str], dict[str, Origin]]:
    """The specs to serve and each id's origin: the configured ones, with the run-time changes."""
    decided = {change.id: change for change in changes}
    specs: list[str] = []
    origins: dict[str, Origin] = {}
    for text in configured:
        model_id = parse_spec(text).id
        change = decided.pop(model_id, None)
        if change is None or change.spec is not None:
            specs.append(text if change is None else str(change.spec))
            origins[model_id] = "config" if change is None or change.spec == text else "added"
    for change in sorted(decided.values(), key=lambda c: c.seq):
        if change.spec is None:
            continue
        try:
            model_id = parse_spec(change.spec).id
        except ValueError as err:  # e.g. a built-in a later version no longer has
            log.warning("superfluid: not serving remembered model %s: %s", change.id, err)
            continue
        specs.append(change.spec)
        origins[model_id] = "added"
    return specs, origins


def initial_state(spec: ModelSpec, origin: Origin) -> ModelState:
    """Where a model is at start, from what is on disk (blocking, quick)."""
    state = ModelState(spec.id, spec.spec.strip(), spec.kind, "available", origin)
    missing = missing_files(spec)
    if missing:
        done = sum(partial_bytes(f) for f in missing)
        return dataclasses.replace(
            state, state="not_downloaded", progress=Progress(done) if done else None
        )
    if spec.kind == "path" and not Path(spec.source).is_file():
        missing_file = f"no such model file: {spec.source}"
        return dataclasses.replace(
            state, state="failed", error=missing_file, error_code="model_load_failed"
        )
    return state


def missing_files(spec: ModelSpec) -> list[HubFile]:
    """The model's hub files that are not in the cache."""
    return [f for f in hub_files(spec) if cached_file(f) is None]


def same_model(a: ModelSpec, b: ModelSpec) -> bool:
    """Whether two specs serve the same files under the same id."""
    return (a.id, a.kind, a.source, a.mmproj) == (b.id, b.kind, b.source, b.mmproj)


def delete_files(spec: ModelSpec) -> None:
    """Delete a removed model's files from the Hugging Face cache.

    Never a path of the user's; nor a built-in's generated file, which is tiny, shared
    by every server using the same cache directory, and rebuilt identically anyway.
    """
    for file in hub_files(spec):
        for path in delete_cached(file):
            log.info("superfluid: deleted %s", path)
