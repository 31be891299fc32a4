"""Finding and watching engine processes from tests (through /proc, Linux)."""

from __future__ import annotations

import os
import time
from pathlib import Path

CHILD_MODULE = "jupyter_superfluid.engine.process.child"


def is_running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def is_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped (SIGSTOP takes effect a moment after kill)."""
    try:
        states = [
            (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            for task in Path(f"/proc/{pid}/task").iterdir()
        ]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return bool(states) and all(state == "T" for state in states)


def parent_of(pid: int) -> int:
    """The parent pid of ``pid``."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def engine_children(parent: int | None = None) -> list[int]:
    """Running engine processes whose parent is ``parent`` (this process by default)."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            pid = int(entry.name)
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            if CHILD_MODULE.encode() in cmdline and parent_of(pid) == parent and is_running(pid):
                found.append(pid)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return found


def wait_until(predicate, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it holds; fail naming ``what`` if it never does."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.02)


def tokens_generated(server_url: str, model: str, headers: dict[str, str] | None = None) -> int:
    """Tokens ``model``'s engine generated so far, as the server at ``server_url`` reports."""
    import httpx

    body = httpx.get(f"{server_url}/v1/models/{model}", headers=headers, timeout=30).json()
    return int(body["superfluid"]["tokens_generated"])


def generated_beside(server_url: str, model: str, headers: dict[str, str] | None = None) -> int:
    """Tokens ``model``'s engine generated for others while one more request ran to its end.

    That request generates 4 tokens, in four engine steps; a generation still running
    beside it adds one in each. The engine sends its counters with a generation's end,
    so the first call brings them up to date and the second is 0 exactly when nothing
    else generates: twice in a row is how a test sees that an engine stopped.
    """
    import httpx

    from support.no_eos import NO_EOS_WIRE

    before = tokens_generated(server_url, model, headers)
    body = {"model": model, "input": "q", "max_output_tokens": 4}
    body |= {"seed": 0, "logit_bias": NO_EOS_WIRE, "store": False}
    r = httpx.post(f"{server_url}/v1/responses", json=body, headers=headers, timeout=120)
    assert r.status_code == 200 and r.json()["usage"]["output_tokens"] == 4, r.text
    return tokens_generated(server_url, model, headers) - before - 4


def settled_tokens(server_url: str, model: str, headers: dict[str, str] | None = None) -> int:
    """Tokens ``model``'s engine generated so far, once it generates nothing else (asserted).

    The count includes the 8 tokens of the two requests that ``generated_beside`` makes.
    """
    generated_beside(server_url, model, headers)
    assert generated_beside(server_url, model, headers) == 0, "the engine kept generating"
    return tokens_generated(server_url, model, headers)
