"""Key hashing, constant-time comparison and ids."""

from __future__ import annotations

import hashlib
import re

from jupyter_superfluid.store import hash_key, keys_match, new_id


def test_hash_key_is_domain_separated_sha256() -> None:
    digest = hash_key("sk-secret")
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert digest == hash_key("sk-secret")
    assert digest != hash_key("sk-secret2")
    assert digest != hashlib.sha256(b"sk-secret").hexdigest()
    assert "sk-secret" not in digest


def test_keys_match() -> None:
    assert keys_match("abc", "abc")
    assert not keys_match("abc", "abd")
    assert not keys_match("abc", "abcd")
    assert keys_match(hash_key("é"), hash_key("é"))


def test_new_id() -> None:
    a, b = new_id("resp"), new_id("resp_")
    assert re.fullmatch(r"resp_[0-9a-f]{32}", a)
    assert re.fullmatch(r"resp_[0-9a-f]{32}", b)
    assert a != b
    assert new_id("task").startswith("task_")
