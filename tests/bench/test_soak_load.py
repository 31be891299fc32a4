"""The soak's load asks the same work in every window: each client repeats one cycle."""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # ``bench`` is a top-level package of the repository
    sys.path.insert(0, str(ROOT))

from bench.conversation import Tokenizer  # noqa: E402
from bench.soak_load import CYCLE, MIX, SoakConfig, _Client, cycle  # noqa: E402


def test_a_cycle_holds_the_mix_exactly_and_opens_a_conversation() -> None:
    kinds = cycle(random.Random(3))
    assert len(kinds) == CYCLE
    assert kinds[0] == "new"
    assert Counter(kinds) == {kind: weight * CYCLE // 100 for kind, weight in MIX}


def _client(n: int) -> _Client:
    return _Client(n, SoakConfig(), cast(Tokenizer, None))  # picking reads no text


def test_clients_differ_in_order_and_each_repeats_its_own() -> None:
    assert len({tuple(_client(n).kinds) for n in range(8)}) == 8
    client = _client(2)
    client.previous = "resp_1"  # its opening succeeded
    picked = [client.pick() for _ in range(3 * CYCLE)]
    assert picked == client.kinds * 3
    assert "continue" in picked


def test_a_continue_with_nothing_to_continue_opens_a_conversation() -> None:
    client = _client(0)
    assert client.pick() == "new"
    picked = [client.pick() for _ in range(CYCLE - 1)]  # every opening failed
    assert "continue" not in picked
    assert picked.count("new") == 2 + client.kinds.count("continue")
