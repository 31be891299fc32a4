"""Shared builders for the store tests: deterministic events, turns and a settable clock."""

from __future__ import annotations

from jupyter_superfluid.store import (
    ConversationAppend,
    Event,
    NewResponse,
    NewSession,
    Store,
    new_id,
)


class Clock:
    """A clock the test moves by hand (passed to Store as ``clock``)."""

    def __init__(self, now: float = 1_760_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.now += seconds


def tokens_for(tag: str, n: int) -> tuple[int, ...]:
    """n token ids derived from a tag, spanning the whole int32 range."""
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(tag))
    return tuple(((seed * 7919 + k * 104729) % (2**31 - 1)) for k in range(n))


def events_for(tag: str, n_input: int = 1, n_output: int = 1, head: bool = False) -> list[Event]:
    """A turn's events: optional head, inputs, outputs; each with its own tokens and item."""
    events = []
    if head:
        events.append(Event("head", tokens_for(tag + "/h", 5)))
    for i in range(n_input):
        item = {"type": "message", "role": "user", "content": f"{tag} in {i}"}
        events.append(Event("input", tokens_for(f"{tag}/i{i}", 3 + i), item))
    for i in range(n_output):
        item = {"type": "message", "role": "assistant", "content": f"{tag} out {i}"}
        events.append(Event("output", tokens_for(f"{tag}/o{i}", 4 + i), item))
    return events


def flat(events: list[Event]) -> list[int]:
    """All token ids of a list of events, in order."""
    return [t for e in events for t in e.tokens]


def respond(
    store: Store,
    tag: str,
    *,
    previous: str | None = None,
    principal: str | None = None,
    store_it: bool = True,
    fork: bool = True,
    conversation: str | None = None,
) -> tuple[str, str, list[Event]]:
    """Commit one turn as the generation layer would; return (response id, session id, events).

    With ``previous`` and ``fork``, the new session forks the previous response's
    session at its end (the warm path); without ``fork`` it starts a fresh session
    (the rebuilt path), still linking the record by previous_response_id.
    """
    parent_id, parent_len = None, 0
    if previous is not None and fork:
        prev = store.get_response(previous, principal)
        assert prev is not None
        parent_id, parent_len = prev.session_id, prev.end
    session = NewSession(new_id("sess"), "tiny", parent_id, parent_len, {"forkable": True})
    events = events_for(tag, head=parent_id is None)
    rid = new_id("resp")
    record = None
    if store_it:
        record = NewResponse(
            id=rid,
            model="tiny",
            status="completed",
            body={"id": rid, "object": "response", "tag": tag},
            input_items=[e.item for e in events if e.kind == "input"],
            output_items=[e.item for e in events if e.kind == "output"],
            previous_response_id=previous,
            principal=principal,
            preview=tag,
            conversation=None
            if conversation is None
            else ConversationAppend(conversation, [e.item for e in events if e.kind == "input"]),
        )
    store.commit_turn(session, events, record)
    return rid, session.id, events
