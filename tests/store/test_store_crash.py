"""Crash safety: a process killed with SIGKILL mid-commit loses nothing it acknowledged."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from jupyter_superfluid.store import Store

from .helpers import flat

REPO = Path(__file__).resolve().parents[2]

# Commits big turns in a loop (chains of forks, some unstored) and prints each
# id only after commit_turn returned: a printed id is an acknowledged commit.
WRITER = textwrap.dedent(
    """
    import sys
    from jupyter_superfluid.store import NewResponse, NewSession, Store
    from tests.store.helpers import events_for

    store = Store(sys.argv[1])
    start = int(sys.argv[2])
    prev = None  # (response id, session id, end) of the last stored turn
    for i in range(start, start + 100000):
        fork = prev is not None and i % 8 != 0  # every 8th turn starts a conversation
        parent_id, parent_len = (prev[1], prev[2]) if fork else (None, 0)
        events = events_for(f"t{i}", n_input=6, n_output=6, head=not fork)
        rid, sid = f"resp_{i:032d}", f"sess_{i:032d}"
        stored = i % 5 != 4
        record = None
        if stored:
            previous = prev[0] if fork else None
            body = {"turn": i}
            record = NewResponse(rid, "tiny", "completed", body, previous_response_id=previous)
        end = store.commit_turn(NewSession(sid, "tiny", parent_id, parent_len), events, record)
        print(rid, sid, end, parent_id or "-", int(stored), flush=True)
        if stored:
            prev = (rid, sid, end)
    """
)


def _expected_tokens(acked: dict[str, tuple[str, str, int, str, int]], sid: str) -> list[int]:
    from .helpers import events_for

    by_session = {a[1]: a for a in acked.values()}
    _, _, _, parent, _ = by_session[sid]
    i = int(sid.split("_")[1])
    own = flat(events_for(f"t{i}", n_input=6, n_output=6, head=parent == "-"))
    return own if parent == "-" else _expected_tokens(acked, parent) + own


def _run_and_kill(root: Path, start: int, after: int) -> dict[str, tuple[str, str, int, str, int]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), str(start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    acked = {}
    for line in proc.stdout:
        rid, sid, end, parent, stored = line.split()
        acked[sid] = (rid, sid, int(end), parent, int(stored))
        if len(acked) >= after:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # The rest through the same file object: the lines its read-ahead buffer holds
    # already come first (communicate() would read the pipe past them and lose them,
    # and with them the parents of later forks).
    rest, err = proc.stdout.read(), proc.stderr.read()
    assert proc.returncode == -signal.SIGKILL, err
    for line in rest.splitlines(keepends=True):  # acknowledged before the kill landed
        if not line.endswith("\n"):
            break  # an acknowledgement the kill cut short is none
        rid, sid, end, parent, stored = line.split()
        acked[sid] = (rid, sid, int(end), parent, int(stored))
    return acked


def test_sigkill_mid_commit_loses_nothing_acknowledged(tmp_path: Path) -> None:
    root = tmp_path / "store"
    acked: dict[str, tuple[str, str, int, str, int]] = {}
    # Several kills, each after a different number of commits, so that some land
    # inside a transaction; each restart reopens (and recovers) the same file.
    for r in range(8):
        acked |= _run_and_kill(root, start=r * 100000, after=20 + 7 * r)
    with Store(root) as store:
        for rid, sid, end, _, stored in acked.values():
            expected = _expected_tokens(acked, sid)
            assert store.session_tokens(sid) == expected
            rec = store.get_response(rid)
            if stored:
                assert rec is not None and rec.session_id == sid and rec.end == end
            else:
                assert rec is None
        # Nothing partial is visible: every record on disk (acknowledged or
        # committed just before the kill) has every event it ends at.
        records = store.list_responses(limit=10_000)
        assert len(records) >= sum(a[4] for a in acked.values())
        for rec in records:
            events = store.session_events(rec.session_id)
            assert len(events) == rec.end
            info = store.get_session(rec.session_id)
            assert info is not None and info.length == rec.end
        with sqlite3.connect(store.path) as conn:
            sessions = [row[0] for row in conn.execute("SELECT id FROM sessions")]
        for sid in sessions:
            info = store.get_session(sid)
            assert info is not None and len(store.session_events(sid)) == info.length
