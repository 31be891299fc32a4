"""The token lists of recently written sessions, so that continuing one reads no events.

A live session's events ``[0, end)`` never change: turns only append, a fork copies
what it inherited when its parent is purged (so its tokens stay the same), and a
purged session is never read. So the tokens of ``(session, end)`` can be remembered
once known, and a committed turn's session, which forks ``(parent, parent_len)`` or
appends to its own ``start``, is what is remembered there plus its own events' tokens:
known at the commit, without a read. Each turn is a new session forking the last, so
reading one from the log walks the whole chain; remembered, a continued turn reads
nothing.
"""

from __future__ import annotations

import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable

from jupyter_superfluid.store.db import new_token_array

REMEMBERED_TOKENS = 1 << 21  # about 8 MiB of int32 token ids, oldest forgotten first

Key = tuple[str, int]  # (session id, end)


class SessionTokens:
    """Token lists by ``(session id, end)``, least recently used forgotten first."""

    def __init__(self, capacity: int = REMEMBERED_TOKENS) -> None:
        self._capacity = capacity
        self._known: OrderedDict[Key, array[int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, session_id: str, end: int) -> list[int] | None:
        """The tokens of events ``[0, end)`` of ``session_id`` if remembered."""
        with self._lock:
            found = self._known.get((session_id, end))
            if found is None:
                return None
            self._known.move_to_end((session_id, end))
            return found.tolist()

    def put(self, session_id: str, end: int, tokens: array[int]) -> None:
        """Remember the tokens of events ``[0, end)`` of ``session_id``."""
        if not self._capacity or len(tokens) > self._capacity:
            return
        with self._lock:
            old = self._known.pop((session_id, end), None)
            self._size -= len(old) if old is not None else 0
            self._known[(session_id, end)] = tokens
            self._size += len(tokens)
            while self._size > self._capacity:
                _, dropped = self._known.popitem(last=False)
                self._size -= len(dropped)

    def committed(
        self,
        session_id: str,
        start: int,
        end: int,
        bases: Iterable[Key],
        new: Iterable[tuple[int, ...]],
    ) -> None:
        """Remember a committed turn's ``[0, end)`` from the first remembered of ``bases``
        (what events ``[0, start)`` are) and its events' tokens ``new``."""
        if start == 0:
            head = new_token_array()
        else:
            with self._lock:
                found = next((self._known[k] for k in bases if k in self._known), None)
            if found is None:
                return  # read from the log when it is next continued
            head = array(found.typecode, found)
        for tokens in new:
            head.extend(tokens)
        self.put(session_id, end, head)

    def clear(self) -> None:
        """Forget everything (sessions were purged or dropped)."""
        with self._lock:
            self._known.clear()
            self._size = 0
