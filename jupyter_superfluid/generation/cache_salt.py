"""Per-principal prefix-cache salts: one user's cache hits never serve, or time, another's.

An engine shared by several principals (vLLM) keeps a prefix cache across requests: a
prompt that shares a prefix with another user's is served faster, and that timing tells
what the other user sent. Each request carries a salt: vLLM only reuses cached blocks
whose salt matches. The salt is a keyed hash (HMAC-SHA256) of the principal's store
owner with this server's secret, kept in the store's directory (``cache-salt.key``,
mode 0600), so salts are stable across restarts but not guessable from an owner id.
Principals that share a store owner (``None``: no key policy; the Jupyter user) share
one salt, as they share everything else.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

SECRET_FILE = "cache-salt.key"
_SHARED = "\0shared"  # the owner-less principals' name in the hash (no owner id is this)


class CacheSalts:
    """Derives each principal's cache salt from one server secret."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    @classmethod
    def in_directory(cls, root: Path) -> CacheSalts:
        """Salts keyed by the secret kept in ``root`` (created on first use, mode 0600)."""
        path = root / SECRET_FILE
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return cls(path.read_bytes())
        with os.fdopen(fd, "wb") as handle:
            secret = secrets.token_bytes(32)
            handle.write(secret)
        return cls(secret)

    def salt(self, owner: str | None) -> str:
        """The cache salt of the principals whose store owner is ``owner`` (43+ characters)."""
        name = _SHARED if owner is None else owner
        return hmac.new(self._secret, name.encode(), hashlib.sha256).hexdigest()
