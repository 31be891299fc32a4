"""SQLite connections for the store: one per thread, short explicit transactions.

The HTTP layer calls the store from a thread pool, so each thread gets its own
connection (a ``sqlite3.Connection`` must not run two statements at once) and
WAL mode lets readers run beside the one writer. Writers in this process take
a lock before ``BEGIN IMMEDIATE``, so they queue in Python instead of
spinning in SQLite's busy handler; the busy timeout still covers another
process touching the file.

Also here: the compact encodings of token ids and JSON values.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
from array import array
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from jupyter_superfluid.store.records import StoreError
from jupyter_superfluid.store.schema import migrate

# int32 is plenty for token ids; pick the typecode that is 4 bytes on this platform.
_TOKEN_CODE = "i" if array("i").itemsize == 4 else "l"
_BIG_ENDIAN = sys.byteorder == "big"


def pack_tokens(tokens: Iterable[int]) -> bytes:
    """Token ids as little-endian int32 bytes."""
    arr = array(_TOKEN_CODE, tokens)
    if _BIG_ENDIAN:
        arr.byteswap()
    return arr.tobytes()


def unpack_tokens(blob: bytes, into: array[int] | None = None) -> array[int]:
    """Decode ``pack_tokens`` bytes (appending to ``into`` when given)."""
    arr = array(_TOKEN_CODE)
    arr.frombytes(blob)
    if _BIG_ENDIAN:
        arr.byteswap()
    if into is None:
        return arr
    into.extend(arr)
    return into


def new_token_array() -> array[int]:
    """An empty array of the token typecode."""
    return array(_TOKEN_CODE)


def dump_json(value: Any) -> str:
    """Compact JSON text of a value (raises TypeError for non-JSON values)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def load_json(text: str | None) -> Any:
    """Decode JSON text; SQL NULL reads as None."""
    return None if text is None else json.loads(text)


class Database:
    """A store file: per-thread connections, read snapshots and serialized writes."""

    def __init__(self, path: Path, *, busy_timeout: float = 30.0, readonly: bool = False) -> None:
        self.path = path
        self._busy_timeout = busy_timeout
        self.readonly = readonly
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closed = False
        if readonly:
            return  # another process owns the file: no WAL switch, no migration
        try:
            conn = self.connection()
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"could not put {path} in WAL mode (got {mode!r})")
            migrate(conn)
        except BaseException:
            self.close()
            raise

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves, so a method is
        # exactly one transaction. check_same_thread=False only so close() can
        # close every thread's connection; each is used by its own thread.
        target = f"file:{self.path}?mode=ro" if self.readonly else str(self.path)
        conn = sqlite3.connect(
            target,
            timeout=self._busy_timeout,
            isolation_level=None,
            check_same_thread=False,
            uri=self.readonly,
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use)."""
        if self._closed:
            raise StoreError("the store is closed")
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        with self._conns_lock:
            if self._closed:
                raise StoreError("the store is closed")
            conn = self._connect()
            self._conns.append(conn)
        self._local.conn = conn
        return conn

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees one consistent snapshot."""
        conn = self.connection()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    @contextmanager
    def write(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """A write transaction, committed on success and rolled back on any exception.

        ``durable`` commits with ``synchronous=FULL`` (fsync before returning), for
        anything a client is told about; ``False`` is for intermediate task events,
        which the next durable commit makes durable too (the WAL is ordered).
        """
        conn = self.connection()
        with self._write_lock:
            conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def checkpoint(self, *, compact: bool = False) -> None:
        """Fold the WAL into the main file (and rewrite it compactly when asked)."""
        conn = self.connection()
        with self._write_lock:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            if compact:
                conn.execute("VACUUM")

    def close(self) -> None:
        """Close every thread's connection; later calls raise StoreError."""
        with self._write_lock, self._conns_lock:
            self._closed = True
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()
