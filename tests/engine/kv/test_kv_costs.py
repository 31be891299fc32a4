"""The measured costs that decide between copying cached cells and evaluating them again."""

from __future__ import annotations

from jupyter_superfluid.engine.local.kv.memory_tier import KVCosts


def test_a_copy_is_judged_by_measured_copies_not_by_parks() -> None:
    costs = KVCosts()
    costs.note_eval(100, 0.001)  # 10 µs a token
    costs.note_save(100, 0.01)  # parks, into fresh memory: 100 µs a token each way
    costs.note_load(100, 0.01)
    # No copy measured yet: one token saved per 64 copied, whatever parks cost.
    assert costs.copy_pays(120, 200)
    assert not costs.copy_pays(2, 200)
    costs.note_copy(200, 0.0002)  # 1 µs a token
    assert costs.copy_pays(120, 200)
    assert not costs.copy_pays(10, 200)  # 100 µs of evaluating against 200 µs of copying


def test_slow_copies_make_evaluating_the_prefix_win() -> None:
    costs = KVCosts()
    costs.note_eval(100, 0.001)
    costs.note_copy(200, 0.02)  # 100 µs a token
    assert not costs.copy_pays(120, 200)
    assert costs.copy_pays(120, 10)
