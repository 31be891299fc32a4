"""The ``compaction`` item's blob: a summary signed with this server's secret, and its expansion.

``POST /v1/responses/compact`` (``openai_api.compaction``) returns the summary
of a conversation as a ``compaction`` item whose ``encrypted_content`` is
``sfc1.<payload>.<signature>``: the payload (base64url JSON: the summary text,
the model that wrote it, when) signed with HMAC-SHA256 over a 32-byte secret
kept in the store directory (``compaction.key``, created on first use, mode
0600). Sent back as input, ``expand`` checks the signature and replaces the
item with the message it stands for (a ``developer`` message carrying the
summary); a tampered blob, or one another server signed, is a 400 naming the
field (``input[3].encrypted_content``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from jupyter_superfluid.errors import InvalidRequest

KEY_FILE = "compaction.key"
VERSION = "sfc1"
SUMMARY_HEADER = "Summary of the conversation so far (compacted):\n"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CompactionSigner:
    """Signs summaries into blobs and expands the blobs it signed."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / KEY_FILE
        self._key: bytes | None = None

    def key(self) -> bytes:
        """The server's secret, created on first use (one writer wins a race)."""
        if self._key is None:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                self._key = self.path.read_bytes()
            else:
                key = secrets.token_bytes(32)
                with os.fdopen(fd, "wb") as f:
                    f.write(key)
                self._key = key
        return self._key

    def sign(self, payload: dict[str, Any]) -> str:
        """``payload`` as an opaque blob only this server can expand."""
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        mac = hmac.new(self.key(), f"{VERSION}.{body}".encode(), hashlib.sha256).digest()
        return f"{VERSION}.{body}.{_b64(mac)}"

    def verify(self, blob: Any, param: str) -> dict[str, Any]:
        """The payload of a blob this server signed, or a 400 naming ``param``."""
        if not isinstance(blob, str):
            raise InvalidRequest(f"{param} must be a string", param=param)
        parts = blob.split(".")
        if len(parts) != 3 or parts[0] != VERSION:
            raise _invalid(param)
        expected = hmac.new(self.key(), f"{VERSION}.{parts[1]}".encode(), hashlib.sha256).digest()
        try:
            good = hmac.compare_digest(_unb64(parts[2]), expected)
            payload = json.loads(_unb64(parts[1])) if good else None
        except (ValueError, UnicodeDecodeError):
            good, payload = False, None
        if not good or not isinstance(payload, dict) or not isinstance(payload.get("summary"), str):
            raise _invalid(param)
        return payload

    def expand(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` with each ``compaction`` input item replaced by the summary it holds."""
        items = body.get("input")
        if not isinstance(items, list) or not any(_is_compaction(i) for i in items):
            return body
        expanded = [
            self._message(item, f"input[{i}].encrypted_content") if _is_compaction(item) else item
            for i, item in enumerate(items)
        ]
        return {**body, "input": expanded}

    def _message(self, item: dict[str, Any], param: str) -> dict[str, Any]:
        summary = self.verify(item.get("encrypted_content"), param)["summary"]
        text = SUMMARY_HEADER + summary
        return {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": text}],
        }


def _is_compaction(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "compaction"


def _invalid(param: str) -> InvalidRequest:
    return InvalidRequest(
        "the compaction item's encrypted_content was not made by this server, or was altered",
        param=param,
        code="invalid_encrypted_content",
    )
