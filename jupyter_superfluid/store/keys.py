"""Key hashing, constant-time comparison and random ids.

API keys are never stored in clear: the store keeps ``hash_key(key)`` as a
record's principal. The hash carries a fixed domain prefix so that a digest
stored here cannot be confused with a plain SHA-256 of the same key elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

KEY_HASH_DOMAIN = b"jupyter_superfluid/api-key/v1\x00"


def hash_key(key: str) -> str:
    """SHA-256 hex digest of a key under this package's domain prefix."""
    return hashlib.sha256(KEY_HASH_DOMAIN + key.encode("utf-8")).hexdigest()


def keys_match(a: str, b: str) -> bool:
    """Compare two secrets (or two key hashes) in constant time."""
    return hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))


def new_id(prefix: str) -> str:
    """``prefix`` + ``_`` (unless it already ends so) + 128 random bits as 32 hex chars."""
    if not prefix.endswith("_"):
        prefix += "_"
    return prefix + secrets.token_hex(16)
