"""The pure parts of a replica pool: prefix affinity, retry backoff, pool specs.

The pool's routing, failover and refusals run over real llama-servers in
``tests/remote/test_pool.py``; what is checked here needs no engine at all.
"""

from __future__ import annotations

import pytest

from jupyter_superfluid.engine.remote.affinity import AffinityTable
from jupyter_superfluid.engine.remote.replicas import backoff
from jupyter_superfluid.models.registry import parse_spec


def test_a_shared_system_prompt_pins_nothing():
    table = AffinityTable()
    system = tuple(range(32))
    first = table.record(None, (*system, *range(100, 200)), "http://a")
    match = table.match((*system, *range(300, 400)))
    assert match.conversation is first and match.tokens == 32 and match.pinned is None
    assert table.match((*system, *range(100, 200), 1, 2)).pinned == "http://a"
    assert table.drop("http://a") == 1 and table.match(system).conversation is None


def test_backoff_doubles_and_is_capped():
    assert [backoff(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff(20) == 30.0


def test_pool_specs():
    spec = parse_spec("big=llama-server:http://a:1,http://b:2/")
    assert (spec.id, spec.kind, spec.source) == ("big", "llama-server", "http://a:1,http://b:2")
    assert parse_spec("llama-server:http://a:1,http://b:2").id == "a:1"
    with pytest.raises(ValueError, match="given twice"):
        parse_spec("big=llama-server:http://a:1,http://a:1")
