"""The disk tier: kept conversations' KV state as files, so a restart is still warm.

One directory per model identity under ``<sessions>/kv/`` holds one file per
state (``disk_file.py`` has the format and its checks). Writes happen on a thread
of their own, never on the token loop: the worker hands over a state it saved
anyway (a park) or saved while idle, and returns at once; a writer that falls
behind refuses new states rather than holding memory. Files are written under
a temporary name, fsynced and renamed, so a crash leaves no file that reads as
valid. The directory is bounded in bytes, least recently used out (a restore
counts as a use; the order survives restarts through the files' mtimes). A
file for a prefix of a newer file's tokens is deleted: the newer one serves
every prompt the older one could.

Reads happen on another thread: before a waiting prompt is admitted, the
worker asks for the file covering its longest prefix, and admits it once the
state is back and checked (or evaluates it if the file turns out bad; a bad
file is deleted).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from array import array
from collections import OrderedDict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from jupyter_superfluid.engine.local.kv.disk_file import (
    SUFFIX,
    BadStateFile,
    dir_name,
    file_name,
    read_header,
    read_state,
    write_state,
)
from jupyter_superfluid.engine.local.kv.prefix_index import BlockIndex
from jupyter_superfluid.engine.local.kv.state import KVState, Staged

log = logging.getLogger(__name__)

# States waiting to be written may hold this much memory (one state is always
# accepted when none waits, however big).
PENDING_BYTES = 64 << 20


class DiskTier:
    """KV state files of one model: index, LRU bound, background writer and reader."""

    def __init__(self, root: Path, model_id: str, identity: dict[str, Any], max_bytes: int) -> None:
        self.dir = Path(root) / dir_name(model_id, identity)
        self.identity = identity
        self.max_bytes = max_bytes
        self._lock = threading.Condition()
        self._index: BlockIndex[str, array[int]] = BlockIndex()
        self._files: OrderedDict[str, int] = OrderedDict()  # name -> bytes, least recent first
        self.bytes = 0
        self._pending: deque[tuple[tuple[int, ...], KVState]] = deque()
        self._pending_names: set[str] = set()
        self._pending_bytes = 0
        self._closing = False
        self.on_change: Callable[[], None] | None = None  # called (off any lock) after a write
        self.writes = self.write_errors = self.refused = 0
        self.reads = self.rejected = self.evicted = 0
        self.dir.mkdir(parents=True, exist_ok=True)
        self._scan()
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="superfluid-kv-read")
        self._writer = threading.Thread(target=self._write_loop, name="superfluid-kv-write")
        self._writer.daemon = True
        self._writer.start()

    # -- the index -----------------------------------------------------------

    def _scan(self) -> None:
        """Index the files a previous run left (headers only); delete broken ones."""
        found = []
        for path in self.dir.iterdir():
            if path.name.startswith(".tmp-"):
                path.unlink(missing_ok=True)  # a write that never finished
            elif path.suffix == SUFFIX:
                try:
                    header = read_header(path, self.identity)
                except (BadStateFile, OSError) as err:
                    log.info("discarding KV file %s: %s", path.name, err)
                    path.unlink(missing_ok=True)
                    self.rejected += 1
                    continue
                found.append((path.stat().st_mtime_ns, path.name, header.tokens, header.file_bytes))
        for _, name, tokens, size in sorted(found):
            self._add(name, tokens, size)
        self._evict()

    def _add(self, name: str, tokens: tuple[int, ...], size: int) -> None:
        """Index one file (the lock held, or before the threads start)."""
        self._forget(name)
        self._index.add(name, array("i", tokens))  # 4 bytes a token, not a tuple's 36
        self._files[name] = size
        self.bytes += size

    def _forget(self, name: str) -> None:
        self._index.remove(name)
        self.bytes -= self._files.pop(name, 0)

    def _delete(self, name: str) -> None:
        """Forget ``name`` and remove its file (the lock held)."""
        self._forget(name)
        (self.dir / name).unlink(missing_ok=True)

    def _evict(self) -> None:
        """Delete least recently used files until the directory fits its bound."""
        while self.bytes > self.max_bytes and self._files:
            self._delete(next(iter(self._files)))
            self.evicted += 1

    def holds(self, tokens: tuple[int, ...]) -> bool:
        """Whether a file (or a pending write) covers all of ``tokens``."""
        with self._lock:
            if file_name(tokens) in self._pending_names:
                return True
            return self._index.best(tokens)[1] == len(tokens)

    def best(
        self, prompt: tuple[int, ...], hashes: list[int] | None = None
    ) -> tuple[tuple[int, ...], int]:
        """The stored tokens sharing the longest prefix with ``prompt``, and its length."""
        with self._lock:
            name, lcp = self._index.best(prompt, hashes)
            return (tuple(self._index.tokens(name)), lcp) if name is not None else ((), 0)

    # -- writing ---------------------------------------------------------------

    def offer(self, tokens: tuple[int, ...], state: KVState, *, wait: float = 0.0) -> bool:
        """Queue ``state`` for writing; False when refused (closing, too big, writer behind).

        ``wait``: seconds to wait for room when the writer is behind.
        """
        name = file_name(tokens)
        deadline = time.monotonic() + wait
        with self._lock:
            if self._closing or len(state) > self.max_bytes:
                return False
            if name in self._pending_names:
                return True
            while self._pending and self._pending_bytes + len(state) > PENDING_BYTES:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.refused += 1
                    return False
                self._lock.wait(left)
            self._pending.append((tokens, state))
            self._pending_names.add(name)
            self._pending_bytes += len(state)
            self._lock.notify_all()
        return True

    def _write_loop(self) -> None:
        """Write queued states until closed and drained."""
        while True:
            with self._lock:
                while not self._pending and not self._closing:
                    self._lock.wait()
                if not self._pending:
                    return
                tokens, state = self._pending[0]
            name = file_name(tokens)
            try:
                size = write_state(self.dir, name, self.identity, tokens, state)
            except OSError as err:
                self.write_errors += 1
                if self.write_errors == 1 or self.write_errors % 100 == 0:  # not once a turn
                    log.warning("cannot write KV state (%d failures): %s", self.write_errors, err)
                size = 0
            with self._lock:
                self._pending.popleft()
                self._pending_names.discard(name)
                self._pending_bytes -= len(state)
                if size:
                    self._written(name, tokens, size)
                self._lock.notify_all()
            if self.on_change is not None:
                self.on_change()

    def _written(self, name: str, tokens: tuple[int, ...], size: int) -> None:
        """Index a new file; drop the files it subsumes and what exceeds the bound."""
        for older in self._index.prefixes_of(tokens):
            if older != name:
                self._delete(older)
        self._add(name, tokens, size)
        self.writes += 1
        self._evict()

    # -- reading ---------------------------------------------------------------

    def read(self, tokens: tuple[int, ...], done: Callable[[Staged | None], None]) -> None:
        """Read and check the file stored for ``tokens`` in the background; ``done`` gets it."""

        def work() -> None:
            staged = None
            try:
                staged = self._read(tokens)
            except Exception:  # a read must always answer, or the prompt would wait forever
                log.exception("reading KV state failed")
            done(staged)

        try:
            self._reader.submit(work)
        except RuntimeError:  # closed
            done(None)

    def _read(self, tokens: tuple[int, ...]) -> Staged | None:
        """The checked state of ``tokens``, or None (a bad file is deleted)."""
        name = file_name(tokens)
        path = self.dir / name
        started = time.perf_counter()
        try:
            header, state = read_state(path, self.identity)
            if header.tokens != tokens:
                raise BadStateFile("the file holds other token ids than its name says")
        except (BadStateFile, OSError) as err:
            log.info("discarding KV file %s: %s", name, err)
            self.reject(tokens)
            return None
        with self._lock:
            if name in self._files:
                self._files.move_to_end(name)
        with contextlib.suppress(OSError):
            os.utime(path)  # the LRU order outlives the process
        self.reads += 1
        return Staged(tokens, state, time.perf_counter() - started)

    def reject(self, tokens: tuple[int, ...]) -> None:
        """The file for ``tokens`` is bad: delete it."""
        with self._lock:
            self.rejected += 1
            self._delete(file_name(tokens))

    # -- the rest ----------------------------------------------------------------

    def stats(self) -> dict[str, object]:
        """What is on disk and what the tier has done."""
        with self._lock:
            return {
                "disk_states": len(self._files),
                "disk_bytes": self.bytes,
                "disk_pending": len(self._pending),
                "disk_writes": self.writes,
                "disk_reads": self.reads,
                "disk_rejected": self.rejected,
                "disk_evicted": self.evicted,
                "disk_refused": self.refused,
            }

    def close(self) -> None:
        """Finish the queued writes, then stop both threads (blocking)."""
        with self._lock:
            self._closing = True
            self._lock.notify_all()
        if self._writer is not threading.current_thread():
            self._writer.join()
        self._reader.shutdown(wait=True)
