"""``PoolEngine`` over fake replicas: affinity, least-loaded, failover, refusal, backoff.

The fakes stand for remote engines at the seam (``tests/remote/test_pool.py`` runs the
same behaviours over real llama-servers); here every rule is checked quickly and exactly.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field, replace

import pytest

from jupyter_superfluid.engine.base import (
    EngineEvent,
    EngineUnavailableError,
    GenerateRequest,
    GenerationFinished,
    ModelInfo,
    PromptEvaluated,
    TokenGenerated,
)
from jupyter_superfluid.engine.remote.affinity import AffinityTable
from jupyter_superfluid.engine.remote.pool import PoolEngine
from jupyter_superfluid.engine.remote.replicas import backoff
from jupyter_superfluid.models.registry import parse_spec

INFO = ModelInfo("m", "", 4096, "{{ x }}", "<s>", "</s>", (2,), n_vocab=300)


@dataclass
class FakeReplica:
    """A remote engine: ``down`` refuses every call as an unreachable remote does."""

    url: str
    info: ModelInfo = INFO
    down: bool = False
    prompts: list[tuple[int, ...]] = field(default_factory=list)

    def connect(self) -> FakeReplica:
        self._check()  # as a remote's connect reads its model's metadata
        return self

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        self._check()
        return [ord(c) for c in text]

    def detokenize(self, tokens: list[int]) -> str:
        self._check()
        return "".join(map(chr, tokens))

    def tokenize_media(self, text, media):
        raise NotImplementedError

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        return self._stream(request)

    async def _stream(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        self._check()
        self.prompts.append(request.prompt_tokens)
        yield PromptEvaluated(len(request.prompt_tokens), 0)
        for token in (7, 8, 9):
            await asyncio.sleep(0)
            yield TokenGenerated(token, "x")
        yield GenerationFinished("stop", 3)

    async def close(self) -> None:
        pass

    def _check(self) -> None:
        if self.down:
            raise EngineUnavailableError(f"llama-server at {self.url} cannot be reached")


def pool_of(*fakes: FakeReplica, **options) -> PoolEngine:
    return PoolEngine.connect("m", [(f.url, f.connect) for f in fakes], **options)


def run(pool: PoolEngine, prompt: tuple[int, ...]) -> list[EngineEvent]:
    async def go() -> list[EngineEvent]:
        return [e async for e in pool.generate(GenerateRequest(prompt))]

    return asyncio.run(go())


def shown(pool: PoolEngine) -> dict[str, dict]:
    return {r["url"]: r for r in pool.replicas()}


HISTORY = tuple(range(10, 74))  # 64 tokens: 4 blocks


def test_a_continuation_stays_and_new_conversations_spread():
    a, b = FakeReplica("http://a"), FakeReplica("http://b")
    pool = pool_of(a, b)
    run(pool, HISTORY)
    run(pool, (*HISTORY, 7, 8, 9, 5, 5))  # continues the first: its prefix is on a
    run(pool, tuple(range(100, 164)))  # a new conversation: b has none pinned
    assert (len(a.prompts), len(b.prompts)) == (2, 1)
    assert {u: r["conversations"] for u, r in shown(pool).items()} == {"http://a": 1, "http://b": 1}
    # A long new input after the history still continues it.
    run(pool, (*HISTORY, 7, 8, 9, 5, 5, 7, 8, 9, *range(200, 400)))
    assert len(a.prompts) == 3


def test_a_shared_system_prompt_pins_nothing():
    table = AffinityTable()
    system = tuple(range(32))
    first = table.record(None, (*system, *range(100, 200)), "http://a")
    match = table.match((*system, *range(300, 400)))
    assert match.conversation is first and match.tokens == 32 and match.pinned is None
    assert table.match((*system, *range(100, 200), 1, 2)).pinned == "http://a"
    assert table.drop("http://a") == 1 and table.match(system).conversation is None


def test_failover_before_the_first_event_and_all_down():
    a, b = FakeReplica("http://a"), FakeReplica("http://b")
    pool = pool_of(a, b)
    run(pool, HISTORY)
    a.down = True
    events = run(pool, (*HISTORY, 7, 8, 9, 1))  # pinned to a, served by b, whole
    assert isinstance(events[0], PromptEvaluated) and events[-1] == GenerationFinished("stop", 3)
    assert len(b.prompts) == 1
    view = shown(pool)
    assert view["http://a"]["health"] == "down" and "http://a" in view["http://a"]["last_error"]
    assert view["http://a"]["conversations"] == 0 and view["http://b"]["conversations"] == 1
    assert view["http://a"]["next_retry_in_s"] is not None
    b.down = True
    with pytest.raises(EngineUnavailableError) as caught:
        pool.tokenize("hi")
    assert "http://a" in str(caught.value) and "http://b" in str(caught.value)
    asyncio.run(pool.close())


def test_a_replica_back_up_is_used_after_its_retry():
    a, b = FakeReplica("http://a", down=True), FakeReplica("http://b")
    pool = pool_of(a, b, retry_cap=0.05)
    assert shown(pool)["http://a"]["health"] == "down"
    a.down = False
    for _ in range(200):
        if shown(pool)["http://a"]["health"] == "up":
            break
        asyncio.run(asyncio.sleep(0.02))
    run(pool, HISTORY)
    assert len(a.prompts) == 1  # the least loaded, with nothing pinned
    asyncio.run(pool.close())


def test_a_replica_serving_another_model_is_refused():
    other = replace(INFO, chat_template="{{ y }}")
    a, b = FakeReplica("http://a"), FakeReplica("http://b", info=other)
    pool = pool_of(a, b)
    view = shown(pool)["http://b"]
    assert view["health"] == "refused" and "chat template differs" in view["last_error"]
    run(pool, HISTORY)
    run(pool, tuple(range(100, 164)))
    assert (len(a.prompts), len(b.prompts)) == (2, 0)


def test_round_robin_ignores_affinity():
    a, b = FakeReplica("http://a"), FakeReplica("http://b")
    pool = pool_of(a, b, routing="round-robin")
    for _ in range(4):
        run(pool, HISTORY)
    assert (len(a.prompts), len(b.prompts)) == (2, 2)


def test_backoff_doubles_and_is_capped():
    assert [backoff(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert backoff(20) == 30.0


def test_pool_specs():
    spec = parse_spec("big=llama-server:http://a:1,http://b:2/")
    assert (spec.id, spec.kind, spec.source) == ("big", "llama-server", "http://a:1,http://b:2")
    assert parse_spec("llama-server:http://a:1,http://b:2").id == "a:1"
    with pytest.raises(ValueError, match="given twice"):
        parse_spec("big=llama-server:http://a:1,http://a:1")
