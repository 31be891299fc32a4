"""``PoolEngine``: several replicas of one model behind one model id, over the Engine seam.

A pool's replicas are any engines (``llama-server``, vLLM, …), each made by a
connector; they must serve the same model (``replicas.IDENTITY_FIELDS``, compared from
each one's ``ModelInfo`` when it connects: the first that answers sets the model, and a
replica that serves another is *refused*, with a message saying what differs).

- Routing (``affinity``, the default): a prompt that continues a conversation (its
  longest served prefix covers at least half of it, ``affinity.AffinityTable``) goes
  to the replica that served it, which holds that prefix in its cache; any other goes
  to the up replica with the fewest generations in flight (then the fewest pinned
  conversations, then the first given). ``round-robin`` ignores affinity, each
  generation going to the next up replica: a benchmarking aid, to measure affinity.
- Failover: a replica that fails before a generation's first event (unreachable, 5xx,
  ``EngineUnavailableError``; a replica's first event waits for its first token, so this
  covers the prompt's evaluation) is marked down, its conversations are unpinned, and the
  generation goes to another replica, where it is served cold and correct (a prompt is
  whole token ids). One lost mid-stream fails that generation (its events were sent)
  and is marked down. A request fails only when every replica is down:
  ``EngineUnavailableError`` naming each replica with its error (503 above).
- Retry: a thread reconnects each replica that is not up when its backoff is due
  (``replicas.backoff``: 1 s, doubling, at most 30 s); then it is routed to again.
- Tokenizing goes to an up replica (they share the vocabulary). ``stats()`` is what
  ``/v1/models`` shows of each replica, and ``replicas()`` what the models API shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import AsyncGenerator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from jupyter_superfluid.engine.base import (
    Engine,
    EngineError,
    EngineEvent,
    EngineUnavailableError,
    GenerateRequest,
    GenerationFinished,
    MediaTokens,
    ModelInfo,
    TokenGenerated,
)
from jupyter_superfluid.engine.remote.affinity import AffinityTable, Conversation, Match
from jupyter_superfluid.engine.remote.client import RemoteEngine
from jupyter_superfluid.engine.remote.replicas import (
    RETRY_CAP_S,
    Connector,
    Replica,
    identity_difference,
)

log = logging.getLogger(__name__)

ROUTINGS = ("affinity", "round-robin")
UNAVAILABLE_CODES = ("engine_unavailable", "engine_crashed")
T = TypeVar("T")


class PoolEngine:
    """One model served by several replica engines: affinity, load, failover, retry."""

    def __init__(
        self,
        model_id: str,
        replicas: Sequence[tuple[str, Connector]],
        *,
        routing: str = "affinity",
        retry_cap: float = RETRY_CAP_S,
    ) -> None:
        if routing not in ROUTINGS:
            raise ValueError(f"pool routing must be one of {', '.join(ROUTINGS)}, not {routing!r}")
        if not replicas:
            raise ValueError(f"a pool of {model_id} needs at least one replica")
        self._id = model_id
        self.routing = routing
        self._retry_cap = retry_cap
        self._replicas = [Replica(url, connector) for url, connector in replicas]
        self._table = AffinityTable()
        self._reference: tuple[str, ModelInfo] | None = None  # the replica that set the model
        self._lock = threading.Lock()  # health, counters, the reference
        self._wake = threading.Condition(self._lock)
        self._turn = 0  # round-robin's next replica
        self._users: Counter[int] = Counter()  # generations per engine (by id)
        self._retired: list[Engine] = []  # replaced engines, closed once unused
        self._closed = False
        self._prober = threading.Thread(target=self._probe_loop, daemon=True, name="pool-retry")

    @classmethod
    def connect(cls, model_id: str, replicas: Sequence[tuple[str, Connector]], **options: Any):
        """A pool with every reachable replica connected (blocking, in parallel).

        Raises EngineUnavailableError naming every replica when none can be reached.
        """
        pool = cls(model_id, replicas, **options)
        with ThreadPoolExecutor(max_workers=len(pool._replicas)) as executor:
            opened = list(executor.map(_open, (r.connector for r in pool._replicas)))
        for replica, result in zip(pool._replicas, opened, strict=True):
            pool._settle(replica, result)
        if not any(r.up for r in pool._replicas):
            error = pool._all_down()
            for engine in pool._retired:
                _close_now(engine)
            raise error
        pool._prober.start()
        log.info("pool %s: %s", model_id, ", ".join(f"{r.url} {r.health}" for r in pool._replicas))
        return pool

    # -- the Engine seam -----------------------------------------------------------

    @property
    def info(self) -> ModelInfo:
        """The model's metadata; the context is the smallest of the up replicas'."""
        assert self._reference is not None, "connect() reads the model's metadata"
        reference = self._reference[1]
        contexts = [r.engine.info.context_size for r in self._replicas if r.up and r.engine]
        return dataclasses.replace(
            reference,
            id=self._id,
            path=",".join(r.url for r in self._replicas),
            context_size=min(contexts, default=reference.context_size),
        )

    def tokenize(self, text: str, *, special: bool = True) -> list[int]:
        """Token ids of ``text``, from an up replica (blocking)."""
        return self._on_any(lambda engine: engine.tokenize(text, special=special))

    def detokenize(self, tokens: list[int]) -> str:
        """Text of ``tokens``, from an up replica (blocking)."""
        return self._on_any(lambda engine: engine.detokenize(tokens))

    def tokenize_media(self, text: str, media: Sequence[bytes]) -> MediaTokens:
        """Tokens and media of ``text``, from an up replica (blocking)."""
        return self._on_any(lambda engine: engine.tokenize_media(text, media))

    def generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Stream the generation from the replica routing picks, failing over before it starts."""
        if self._closed:
            raise EngineError("the engine is closed")
        return self._generate(request)

    async def close(self) -> None:
        """Stop retrying and close every replica's engine (the remotes keep running)."""
        with self._wake:
            self._closed = True
            self._wake.notify_all()
            engines = [r.engine for r in self._replicas if r.engine is not None]
            engines += self._retired
            self._retired = []
        for engine in engines:
            with contextlib.suppress(Exception):
                await engine.close()

    # -- what is shown -------------------------------------------------------------

    def replicas(self) -> list[dict[str, Any]]:
        """Each replica's URL, health, retry schedule, in-flight and pinned counts."""
        pinned = self._table.pinned()
        with self._lock:
            return [r.as_dict(pinned[r.url]) for r in self._replicas]

    def stats(self) -> dict[str, Any]:
        """The pool as ``/v1/models`` shows it (``superfluid.routing``, ``.replicas``)."""
        return {"routing": self.routing, "replicas": self.replicas()}

    # -- generating ----------------------------------------------------------------

    async def _generate(self, request: GenerateRequest) -> AsyncGenerator[EngineEvent, None]:
        """Start on a replica (failing over), then relay its events and record the prefix."""
        await self._close_retired()
        prompt = request.prompt_tokens
        match = self._table.match(prompt)
        replica, engine, stream, first = await self._start(request, match)
        continued = match.conversation if match.pinned is not None else None
        conversation: Conversation = self._table.record(continued, prompt, replica.url)
        generated: list[int] = []
        try:
            yield first
            async for event in stream:
                if isinstance(event, TokenGenerated):
                    generated.append(event.token_id)
                elif _unavailable(event):
                    assert isinstance(event, GenerationFinished)
                    self._failed(replica, engine, event.error or "the generation failed")
                yield event
        finally:
            self._finish(replica, engine)
            await stream.aclose()
            if generated and replica.up and replica.engine is engine:
                self._table.record(conversation, prompt + tuple(generated), replica.url)

    async def _start(
        self, request: GenerateRequest, match: Match
    ) -> tuple[Replica, Engine, AsyncGenerator[EngineEvent, None], EngineEvent]:
        """The replica serving ``request`` and its stream's first event (failing over)."""
        tried: set[str] = set()
        while True:
            replica, engine = self._choose(match, tried)
            tried.add(replica.url)
            stream: AsyncGenerator[EngineEvent, None] | None = None
            try:
                stream = engine.generate(request)
                first = await stream.__anext__()
            except (EngineUnavailableError, StopAsyncIteration) as err:
                await self._abandon(replica, engine, stream)
                self._failed(replica, engine, str(err) or f"{replica.url} sent no event")
                continue
            except BaseException:
                await self._abandon(replica, engine, stream)
                raise
            if _unavailable(first):  # refused before generating: another replica may serve
                assert isinstance(first, GenerationFinished)
                await self._abandon(replica, engine, stream)
                self._failed(replica, engine, first.error or "the generation failed")
                continue
            return replica, engine, stream, first

    def _choose(self, match: Match, tried: set[str]) -> tuple[Replica, Engine]:
        """The replica for a generation (not one tried already); all down: raise."""
        pinned = self._table.pinned() if self.routing == "affinity" else Counter[str]()
        with self._lock:
            up = [r for r in self._replicas if r.up and r.url not in tried]
            if not up:
                raise self._all_down()
            if self.routing == "round-robin":
                replica = up[self._turn % len(up)]
                self._turn += 1
            else:
                home = [r for r in up if r.url == match.pinned]
                replica = home[0] if home else min(up, key=lambda r: (r.in_flight, pinned[r.url]))
            assert replica.engine is not None
            replica.in_flight += 1
            replica.served += 1
            self._users[id(replica.engine)] += 1
            return replica, replica.engine

    def _finish(self, replica: Replica, engine: Engine) -> None:
        """A generation on ``replica`` ended."""
        with self._lock:
            replica.in_flight -= 1
            self._users[id(engine)] -= 1

    async def _abandon(
        self, replica: Replica, engine: Engine, stream: AsyncGenerator[EngineEvent, None] | None
    ) -> None:
        """Give up a generation that did not start on ``replica``."""
        self._finish(replica, engine)
        with self._lock:
            replica.served -= 1
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.aclose()

    # -- health --------------------------------------------------------------------

    def _on_any(self, call: Callable[[Engine], T]) -> T:
        """``call`` on an up replica, the next one if it is unavailable (blocking)."""
        tried: set[str] = set()
        while True:
            with self._lock:
                up = [r for r in self._replicas if r.up and r.url not in tried]
                if not up:
                    raise self._all_down()
                replica = min(up, key=lambda r: r.in_flight)
                engine = replica.engine
            assert engine is not None
            tried.add(replica.url)
            try:
                return call(engine)
            except EngineUnavailableError as err:
                self._failed(replica, engine, str(err))

    def _failed(self, replica: Replica, engine: Engine, error: str) -> None:
        """Mark ``replica`` down (once per failure of its engine); unpin its conversations."""
        with self._wake:
            if replica.engine is not engine or replica.health != "up":
                return
            replica.set_failed(error, cap=self._retry_cap)
            self._wake.notify_all()
        dropped = self._table.drop(replica.url)
        log.warning(
            "pool %s: replica %s is down (%s conversations move): %s",
            *(self._id, replica.url, dropped, error),
        )

    def _all_down(self) -> EngineUnavailableError:
        """The error of a request when no replica can serve it (called under the lock)."""
        each = "; ".join(f"{r.url} ({r.last_error or r.health})" for r in self._replicas)
        return EngineUnavailableError(f"every replica of {self._id} is down: {each}")

    def _settle(self, replica: Replica, result: Engine | BaseException) -> None:
        """Take a connection attempt's outcome: up, refused (another model) or down."""
        if isinstance(result, BaseException):
            error = str(result) if isinstance(result, EngineError) else repr(result)
            with self._lock:
                replica.set_failed(error or f"{replica.url} cannot be reached", cap=self._retry_cap)
            return
        with self._lock:
            if self._reference is None:
                self._reference = (replica.url, result.info)
            ref_url, reference = self._reference
            differs = identity_difference(reference, result.info)
            if self._closed or differs is not None:
                self._retired.append(result)
            if differs is not None:
                replica.set_failed(
                    f"refused: {replica.url} serves another model than {ref_url} (its "
                    f"{differs} differs); every replica of {self._id} must serve the same "
                    "vocabulary and chat template",
                    "refused",
                    cap=self._retry_cap,
                )
            elif not self._closed:
                if replica.engine is not None:
                    self._retired.append(replica.engine)
                replica.set_up(result)
        if differs is not None:
            log.warning("pool %s: %s", self._id, replica.last_error)

    def _probe_loop(self) -> None:
        """Reconnect each replica that is not up when its retry is due, until closed."""
        while True:
            with self._wake:
                due = self._due()
                while not self._closed and not due:
                    self._wake.wait(self._until_next())
                    due = self._due()
                if self._closed:
                    return
            for replica in due:
                self._settle(replica, _open(replica.connector))
                if replica.up:
                    log.info("pool %s: replica %s is up again", self._id, replica.url)

    def _due(self) -> list[Replica]:
        """The replicas whose retry is due now (under the lock)."""
        now = time.monotonic()
        return [r for r in self._replicas if r.due(now)]

    def _until_next(self) -> float | None:
        """Seconds until the next retry is due (None: none is planned; under the lock)."""
        times = [r.retry_at for r in self._replicas if r.health != "up" and r.retry_at]
        return max(0.0, min(times) - time.monotonic()) if times else None

    async def _close_retired(self) -> None:
        """Close the replaced engines that no generation uses any more."""
        with self._lock:
            idle = [e for e in self._retired if not self._users[id(e)]]
            self._retired = [e for e in self._retired if self._users[id(e)]]
        for engine in idle:
            with contextlib.suppress(Exception):
                await engine.close()


def _open(connector: Connector) -> Engine | BaseException:
    """A connected engine, or why it could not be had (blocking)."""
    try:
        engine = connector()
    except Exception as err:  # any failure is the replica's: it is retried
        return err
    if isinstance(engine, RemoteEngine):
        # Failover covers what comes before a generation's first event: a replica's
        # first event waits for its first token, so a replica lost while it evaluates
        # the prompt is failed over too.
        engine.opens_before_first_token = False
    return engine


def _unavailable(event: EngineEvent) -> bool:
    """Whether ``event`` ends a generation because its engine is unavailable."""
    return (
        isinstance(event, GenerationFinished)
        and event.reason == "error"
        and event.code in UNAVAILABLE_CODES
    )


def _close_now(engine: Engine) -> None:
    """Close an engine that never generated, from a thread with no event loop."""
    with contextlib.suppress(Exception):
        asyncio.run(engine.close())
