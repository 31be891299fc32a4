"""KV state as bytes: holding it, taking it out of a context and putting it back.

``KVState`` holds one sequence's serialized KV (``llama_state_seq_get_data``
bytes) in an anonymous memory map of its own rather than on the heap: a freed
state goes straight back to the operating system, so resident memory follows
the parked bytes instead of the allocator's high-water mark.

``KVMemory`` is what the prefix cache asks of a context (``LlamaMemory`` is it
over llama.cpp); ``StateStore`` what it asks of the disk tier.
"""

from __future__ import annotations

import ctypes
import mmap
from dataclasses import dataclass
from typing import Any, Protocol

import llama_cpp.llama_cpp as L

from jupyter_superfluid.engine.base import EngineError


class KVState:
    """One sequence's serialized KV state, in memory of its own."""

    __slots__ = ("buffer", "size")

    def __init__(self, size: int) -> None:
        self.buffer = mmap.mmap(-1, max(size, 1))
        self.size = size

    def __len__(self) -> int:
        return self.size

    def view(self) -> memoryview:
        """The state's bytes (a view; valid while the state lives)."""
        return memoryview(self.buffer)[: self.size]


class KVMemory(Protocol):
    """The KV operations the cache needs (llama_memory_seq_rm / seq_cp, state_seq)."""

    def remove(self, seq_id: int, p0: int, p1: int) -> None:
        """Drop positions [p0, p1) of ``seq_id`` (-1: open end)."""
        ...

    def copy(self, src: int, dst: int, p1: int) -> None:
        """Give the empty ``dst`` the cells of ``src``'s positions [0, p1)."""
        ...

    def save(self, seq_id: int) -> KVState:
        """The serialized KV state of ``seq_id``."""
        ...

    def load(self, seq_id: int, state: KVState) -> bool:
        """Restore a saved state into the empty ``seq_id``; False when it does not fit."""
        ...

    def span(self, seq_id: int) -> tuple[int, int]:
        """The lowest and highest position ``seq_id`` holds ((-1, -1) when empty)."""
        ...


class StateStore(Protocol):
    """Where kept states also go, to outlive the process (the disk tier)."""

    def offer(self, tokens: tuple[int, ...], state: KVState, *, wait: float = 0.0) -> bool:
        """Keep ``state`` for ``tokens`` (written in the background); False if refused.

        ``wait``: seconds to wait for room when the writer is behind.
        """
        ...

    def holds(self, tokens: tuple[int, ...]) -> bool:
        """Whether a stored state covers all of ``tokens``."""
        ...

    def reject(self, tokens: tuple[int, ...]) -> None:
        """The state stored for ``tokens`` did not restore: forget it."""
        ...


@dataclass(frozen=True)
class Staged:
    """A state read back from disk for a waiting prompt, and the token ids it holds."""

    tokens: tuple[int, ...]
    state: KVState
    seconds: float = 0.0  # what reading and checking it took


class LlamaMemory:
    """``KVMemory`` over a context's ``llama_memory_t`` (``streams``: one KV stream per
    sequence, else one unified cache)."""

    def __init__(self, ctx: Any, *, streams: bool = False) -> None:
        self._ctx = ctx
        self._mem = L.llama_get_memory(ctx)
        self.streams = streams
        self._scratch: KVState | None = None  # the buffer copies between streams go through

    def remove(self, seq_id: int, p0: int, p1: int) -> None:
        """Drop positions [p0, p1) of a sequence."""
        if not L.llama_memory_seq_rm(self._mem, seq_id, p0, p1):
            raise EngineError(f"cannot trim KV sequence {seq_id} at {p0}")

    def copy(self, src: int, dst: int, p1: int) -> None:
        """Give the empty ``dst`` the cells of ``src``'s positions [0, p1)."""
        if not self.streams:
            L.llama_memory_seq_cp(self._mem, src, dst, 0, p1)  # tags the same cells
            return
        # Between streams llama.cpp's seq_cp copies the whole stream, every cell of a
        # window used or not (134 MB on the bench model, at the next decode, which
        # all running streams wait for); the source's state holds only its used cells.
        if not self.load(dst, self._save_into_scratch(src)):
            L.llama_memory_seq_cp(self._mem, src, dst, -1, -1)
        self.remove(dst, p1, -1)

    def save(self, seq_id: int) -> KVState:
        """The sequence's cells, serialized (llama_state_seq_get_data)."""
        return self._save_into(KVState(self._state_size(seq_id)), seq_id)

    def _state_size(self, seq_id: int) -> int:
        return int(L.llama_state_seq_get_size(self._ctx, seq_id))

    def _save_into(self, state: KVState, seq_id: int) -> KVState:
        view = (ctypes.c_uint8 * len(state)).from_buffer(state.buffer)
        state.size = L.llama_state_seq_get_data(self._ctx, view, len(state), seq_id)
        return state

    def _save_into_scratch(self, seq_id: int) -> KVState:
        """``save`` into a buffer kept from one copy to the next.

        Faulting in fresh anonymous pages, and unmapping them after, costs more than
        the copy itself (about 55 of 75 ms for 4k tokens of the bench model), so a copy
        reuses one buffer, grown by half again whenever a larger state comes.
        """
        size = self._state_size(seq_id)
        if self._scratch is None or len(self._scratch.buffer) < size:
            self._scratch = None  # unmapped before the larger one is faulted in
            self._scratch = KVState(size + size // 2)
        self._scratch.size = size
        return self._save_into(self._scratch, seq_id)

    def load(self, seq_id: int, state: KVState) -> bool:
        """Restore a saved sequence into ``seq_id``; False when the KV has no room."""
        view = (ctypes.c_uint8 * len(state)).from_buffer(state.buffer)
        return bool(L.llama_state_seq_set_data(self._ctx, view, len(state), seq_id))

    def span(self, seq_id: int) -> tuple[int, int]:
        """Lowest and highest position of a sequence ((-1, -1) when empty)."""
        return (
            L.llama_memory_seq_pos_min(self._mem, seq_id),
            L.llama_memory_seq_pos_max(self._mem, seq_id),
        )
