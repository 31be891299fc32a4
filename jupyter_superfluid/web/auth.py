"""Superfluid API keys, key policies and the principals they map to.

A key policy file gives several keys, each its own principal with scopes::

    {"keys": [
        {"name": "alice", "key": "sk-alice-...", "scopes": ["responses:read", "responses:write"]},
        {"name": "ci", "sha256": "<hex sha256 of the key>"}
    ]}

A key is given in clear (``key``) or as the hex SHA-256 of its text
(``sha256``); either way only hashes are kept in memory and in the store, and
keys are compared in constant time. Scopes default to ``DEFAULT_KEY_SCOPES``: all
of ``ALL_SCOPES`` but ``models:write``, which is granted by name. ``--api-key`` keys,
the Jupyter user, and anyone on a standalone server with no keys hold every scope.
Under a key policy every key (and the Jupyter user) is isolated: it sees only
what it created. With only ``--api-key`` keys, everything is shared.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path

ALL_SCOPES = frozenset(
    {
        "models:read",
        "models:write",
        "responses:read",
        "responses:write",
        "tasks:read",
        "tasks:write",
    }
)
# A policy key that lists no scopes gets these: everything but managing the served
# models (adding, loading, unloading, removing), which must be granted by name.
DEFAULT_KEY_SCOPES = ALL_SCOPES - {"models:write"}


def key_digest(key: str) -> str:
    """Hex SHA-256 of a key's text (how keys are kept)."""
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who is calling: ``owner`` is the store owner (None when nothing is isolated)."""

    name: str
    owner: str | None
    scopes: frozenset[str] = ALL_SCOPES

    def has_scope(self, scope: str) -> bool:
        """Whether this principal holds ``scope``."""
        return scope in self.scopes


class KeyPolicyError(ValueError):
    """A key-policy file that cannot be read; the message names the file and the cause."""


@dataclass(frozen=True)
class _Entry:
    digest: str
    name: str
    scopes: frozenset[str]


class KeyRing:
    """The keys this server accepts and the principal each one is."""

    def __init__(self, api_keys: list[str] | tuple[str, ...] = (), policy_file: str = "") -> None:
        self.isolated = bool(policy_file)
        entries = [_Entry(key_digest(k), "api-key", ALL_SCOPES) for k in api_keys if k]
        if policy_file:
            entries += _read_policy(Path(policy_file))
        self._entries = tuple(entries)

    @property
    def enabled(self) -> bool:
        """Whether any key is configured."""
        return bool(self._entries)

    def match(self, key: str) -> Principal | None:
        """The principal of ``key``, or None; compares every entry in constant time."""
        digest = key_digest(key)
        found: _Entry | None = None
        for entry in self._entries:
            if hmac.compare_digest(entry.digest, digest):
                found = entry
        if found is None:
            return None
        owner = f"key:{found.digest[:16]}" if self.isolated else None
        return Principal(name=found.name, owner=owner, scopes=found.scopes)

    def jupyter_principal(self, username: str) -> Principal:
        """The principal of a request Jupyter itself authenticated (all scopes)."""
        return Principal(name=username, owner="jupyter" if self.isolated else None)

    def anonymous(self) -> Principal:
        """The principal of an unauthenticated standalone request with no keys configured."""
        return Principal(name="anonymous", owner=None)


def _read_policy(path: Path) -> list[_Entry]:
    try:
        doc = json.loads(path.read_text())
        raw_keys = doc["keys"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise KeyPolicyError(f"cannot read key policy {path}: {err}") from err
    entries = []
    for i, item in enumerate(raw_keys):
        if not isinstance(item, dict) or not ("key" in item or "sha256" in item):
            raise KeyPolicyError(f"{path}: keys[{i}] needs 'key' or 'sha256'")
        digest = str(item.get("sha256") or key_digest(str(item["key"]))).lower()
        scopes = frozenset(item.get("scopes") or DEFAULT_KEY_SCOPES)
        unknown = scopes - ALL_SCOPES - {"tools:execute"}
        if unknown:
            raise KeyPolicyError(f"{path}: keys[{i}] has unknown scopes {sorted(unknown)}")
        entries.append(_Entry(digest, str(item.get("name") or f"key{i}"), scopes))
    return entries
