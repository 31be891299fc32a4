"""The Jupyter AI persona: a real persona manager and ``YChat`` over a real standalone server.

Jupyter AI's packages live in a cached folder (``jupyter_ai_site.py``), never in the test
venv, so the persona runs in a subprocess (``persona_driver.py``) with that folder on
``PYTHONPATH``; the persona manager finds the persona through the entry point that
``pyproject.toml`` declares. The server side is checked here, over HTTP.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import httpx
import pytest

from integrations.jupyter_ai_site import ENTRY_GROUP, persona_entry_points, pyproject, site_env
from jupyter_superfluid.pytest_plugin import TINY_MODELS, StandaloneServer, free_port

DRIVER = Path(__file__).with_name("persona_driver.py")
KEY = "sk-jupyter-ai"
CHAT_PATH = "notes/ideas.chat"
PERSONA_ID = "jupyter-ai-personas::jupyter_superfluid::SuperfluidPersona"


def run_session(tmp_path: Path, config: dict[str, Any], *messages: str) -> dict[str, Any]:
    """One Jupyter AI session in a subprocess: what its chat shows afterwards."""
    spec = {
        "chat_file": str(tmp_path / "ideas.chat"),
        "chat_path": CHAT_PATH,
        "root_dir": str(tmp_path),
        "config": {"SuperfluidPersona": {"max_output_tokens": 24, **config}},
        "messages": list(messages),
        "out": str(tmp_path / "session.json"),
    }
    (tmp_path / CHAT_PATH).parent.mkdir(exist_ok=True)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    env = site_env()
    env["PYTHONPATH"] = f"{persona_entry_points(tmp_path)}:{env['PYTHONPATH']}"
    done = subprocess.run(
        [sys.executable, str(DRIVER), str(spec_file)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(Path(spec["out"]).read_text()))


def _persona_config(server: StandaloneServer) -> dict[str, Any]:
    return {"server_url": server.url, "token": KEY}


def _get(server: StandaloneServer, path: str, **params: Any) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {KEY}"}
    response = httpx.get(server.url + path, params=params, headers=headers, timeout=30)
    response.raise_for_status()
    return dict(response.json())


def _replies(session: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in session["messages"] if m["sender"] == PERSONA_ID]


def _chat_conversations(server: StandaloneServer, chat_id: str) -> list[dict[str, Any]]:
    listing = _get(server, "/v1/conversations", limit=100)["data"]
    return [c for c in listing if c["metadata"].get("jupyter_ai_chat_id") == chat_id]


def _texts(server: StandaloneServer, conv_id: str) -> list[tuple[str, str]]:
    """(role, text) of each item of the conversation, oldest first."""
    items = _get(server, f"/v1/conversations/{conv_id}/items", order="asc", limit=100)["data"]
    return [(i["role"], "".join(part["text"] for part in i["content"])) for i in items]


def _turns(server: StandaloneServer, conv_id: str) -> list[dict[str, Any]]:
    """The conversation's responses, oldest first, each with its usage."""
    tree = _get(server, f"/v1/conversations/{conv_id}/responses")["data"]
    return [_get(server, f"/v1/responses/{r['id']}") for r in tree]


def _assert_streamed(session: dict[str, Any], count: int, new: int) -> list[dict[str, Any]]:
    """``count`` replies from the persona, none an error, the ``new`` ones streamed."""
    replies = _replies(session)
    assert len(replies) == count, session["messages"]
    for reply in replies[count - new :]:
        assert not reply["body"].startswith("⚠️"), reply["body"]
        # Created empty, then updated as deltas came: at least one body after the first
        # (a tiny model may answer in a single delta, so no more can be asked).
        assert len(session["bodies"][reply["id"]]) >= 2, "the reply did not stream"
    return replies


@pytest.mark.jupyter_ai
def test_a_chat_is_one_warm_conversation_across_a_restart(
    sf_start_standalone: Callable[..., StandaloneServer], tmp_path: Path
) -> None:
    store = tmp_path / "store"
    server = sf_start_standalone(f"--api-key={KEY}", sessions_dir=store)
    first = run_session(tmp_path, _persona_config(server), "What is a prefix cache?", "And why?")
    assert first["persona_user"]["bot"] and first["persona_user"]["name"] == "Superfluid"
    replies = _assert_streamed(first, 2, 2)
    [conv] = _chat_conversations(server, first["chat_id"])
    assert conv["metadata"]["title"] == "What is a prefix cache?"
    assert conv["metadata"]["jupyter_ai_chat"] == CHAT_PATH
    expected = [
        ("user", "What is a prefix cache?"),
        ("assistant", replies[0]["body"]),
        ("user", "And why?"),
        ("assistant", replies[1]["body"]),
    ]
    assert _texts(server, conv["id"]) == expected
    one, two = _turns(server, conv["id"])
    assert one["model"] == TINY_MODELS[0]  # the first served model, none configured
    assert two["previous_response_id"] == one["id"]
    assert two["usage"]["input_tokens_details"]["cached_tokens"] > 0

    server.stop()  # a Jupyter restart: the server and the personas start again
    server = sf_start_standalone(f"--api-key={KEY}", sessions_dir=store)
    again = run_session(tmp_path, _persona_config(server), "One more thing.")
    assert again["chat_id"] == first["chat_id"]
    third = _assert_streamed(again, 3, 1)[-1]
    [same] = _chat_conversations(server, first["chat_id"])
    assert same["id"] == conv["id"]
    more = [("user", "One more thing."), ("assistant", third["body"])]
    assert _texts(server, conv["id"]) == [*expected, *more]
    assert _turns(server, conv["id"])[-1]["previous_response_id"] == two["id"]


@pytest.mark.jupyter_ai
def test_errors_are_said_in_the_chat(standalone: StandaloneServer, tmp_path: Path) -> None:
    unknown = {"server_url": standalone.url, "token": "unused", "model": "superfluid/nope"}
    [said] = _replies(run_session(tmp_path, unknown, "Hello?"))
    assert said["body"].startswith("⚠️") and "superfluid/nope" in said["body"]

    nowhere = {"server_url": f"http://127.0.0.1:{free_port()}", "token": "unused"}
    said = _replies(run_session(tmp_path, nowhere, "Anyone?"))[-1]
    assert said["body"].startswith("⚠️ Cannot reach the superfluid server")


def test_the_persona_is_declared_as_a_jupyter_ai_entry_point() -> None:
    project = pyproject()["project"]
    declared = project["entry-points"][ENTRY_GROUP]
    assert declared == {
        "superfluid": "jupyter_superfluid.integrations.jupyter_ai:SuperfluidPersona"
    }
    extra = project["optional-dependencies"]["jupyter-ai"]
    assert any(r.startswith("jupyter-ai-persona-manager") for r in extra)
    installed = {ep.name: ep.value for ep in entry_points(group=ENTRY_GROUP)}
    if installed:  # an install made since the entry point was declared
        assert installed.get("superfluid") == declared["superfluid"]


@pytest.mark.skipif(
    importlib.util.find_spec("jupyter_ai_persona_manager") is not None,
    reason="the jupyter-ai extra is installed here",
)
def test_without_the_extra_the_import_error_names_it() -> None:
    with pytest.raises(ImportError, match=r'pip install "jupyter_superfluid\[jupyter-ai\]"'):
        importlib.import_module("jupyter_superfluid.integrations.jupyter_ai")
