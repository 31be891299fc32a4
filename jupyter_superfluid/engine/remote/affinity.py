"""Conversation affinity for a pool of replicas: which replica served a prompt's prefix.

A token sequence is cut into blocks of ``BLOCK`` tokens; each block's key is a hash
chained over every block before it, so one key names a whole prefix. Each sequence a
replica served (a prompt, then that prompt with its generated tokens) is recorded as
the keys of its blocks, all pointing at one *conversation*, which is pinned to that
replica. A new prompt's longest recorded prefix finds the conversation it continues,
and the prompt goes where that prefix is cached when it reaches the end of the
conversation's last served sequence (a continuation, however long its new input) or
covers at least ``MIN_SHARE`` of the prompt (a retry, a regeneration, a rebuilt turn).
A shared system prompt alone pins nothing: a new conversation is free to go elsewhere.

Pure bookkeeping (no I/O), bounded: the least recently served conversations are
forgotten past ``max_keys`` keys. Thread-safe (a pool records from the event loop and
drops a replica's pins from tokenizing threads).
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

BLOCK = 16  # tokens per key
MIN_SHARE = 0.5  # of a prompt its served prefix must cover to pin it
MAX_KEYS = 500_000  # ~50 MB of keys at most: 30M tokens of conversations


@dataclass
class Conversation:
    """A chain of served sequences sharing their prefixes, pinned to one replica."""

    id: int
    replica: str  # the URL of the replica that served it last
    keys: set[int] = field(default_factory=set)
    depth: int = 0  # whole blocks of the last sequence recorded


@dataclass(frozen=True)
class Match:
    """What a prompt continues: the conversation and how many of its tokens are served."""

    conversation: Conversation | None
    tokens: int  # the prompt's tokens in its longest recorded prefix (whole blocks)
    prompt: int  # the prompt's length
    extends: bool = False  # the prefix reaches the end of the conversation's last sequence

    @property
    def pinned(self) -> str | None:
        """The replica the prompt should go to, when it continues a conversation."""
        if self.conversation is None or not self.tokens:
            return None
        if not self.extends and self.tokens < MIN_SHARE * self.prompt:
            return None
        return self.conversation.replica


def block_keys(tokens: Sequence[int], block: int = BLOCK) -> list[int]:
    """The chained keys of ``tokens``' whole blocks, in order."""
    keys, key = [], 0
    for start in range(0, len(tokens) - block + 1, block):
        key = hash((key, tuple(tokens[start : start + block])))
        keys.append(key)
    return keys


class AffinityTable:
    """Recorded prefixes → conversations → replicas."""

    def __init__(self, *, block: int = BLOCK, max_keys: int = MAX_KEYS) -> None:
        self.block = block
        self.max_keys = max_keys
        self._owner: dict[int, Conversation] = {}
        self._conversations: OrderedDict[int, Conversation] = OrderedDict()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def match(self, prompt: Sequence[int]) -> Match:
        """The conversation whose recorded prefix of ``prompt`` is the longest."""
        found, depth = None, 0
        with self._lock:
            for i, key in enumerate(block_keys(prompt, self.block)):
                owner = self._owner.get(key)
                if owner is None:
                    break  # a deeper key chains over this one: it cannot be recorded
                found, depth = owner, i + 1
            extends = found is not None and depth >= found.depth
        return Match(found, depth * self.block, len(prompt), extends)

    def record(
        self, conversation: Conversation | None, tokens: Sequence[int], replica: str
    ) -> Conversation:
        """Record that ``replica`` served ``tokens`` for ``conversation`` (a new one if None)."""
        keys = block_keys(tokens, self.block)
        with self._lock:
            if conversation is None or conversation.id not in self._conversations:
                conversation = Conversation(next(self._ids), replica)
            conversation.replica = replica
            self._conversations[conversation.id] = conversation
            self._conversations.move_to_end(conversation.id)
            conversation.depth = len(keys)
            for key in keys:
                previous = self._owner.get(key)
                if previous is not None and previous is not conversation:
                    previous.keys.discard(key)
                self._owner[key] = conversation
                conversation.keys.add(key)
            while len(self._owner) > self.max_keys and len(self._conversations) > 1:
                self._forget(self._conversations.popitem(last=False)[1])
        return conversation

    def drop(self, replica: str) -> int:
        """Forget the conversations pinned to ``replica`` (it lost its cache); how many."""
        with self._lock:
            gone = [c for c in self._conversations.values() if c.replica == replica]
            for conversation in gone:
                del self._conversations[conversation.id]
                self._forget(conversation)
        return len(gone)

    def pinned(self) -> Counter[str]:
        """How many conversations are pinned to each replica."""
        with self._lock:
            return Counter(c.replica for c in self._conversations.values())

    def _forget(self, conversation: Conversation) -> None:
        """Remove a conversation's keys (those no later conversation took over)."""
        for key in conversation.keys:
            if self._owner.get(key) is conversation:
                del self._owner[key]
        conversation.keys.clear()
