"""The Superfluid persona answering in Jupyter AI's own chat UI, in a real browser.

JupyterLab 4 and Notebook 7 run with Jupyter AI from its cached folder (``jupyterlab-chat`` 0.25's
front-end and server extension, the router and the persona manager; see
``tests/integrations/jupyter_ai_site.py``) beside this extension, whose own chat panel
bundles ``@jupyter/chat`` 0.20: both front-ends load in one page. A ``.chat`` file opens
in jupyterlab-chat's document widget, where the persona is picked by default; what the
person types there is answered by the persona from this server, as one of its stored,
warm conversations, which this extension's panel lists too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from integrations.jupyter_ai_site import jupyter_env
from playwright.sync_api import expect

from jupyter_superfluid.integrations.superfluid_chat import EMPTY_ANSWER
from jupyter_superfluid.pytest_plugin import TINY_MODELS
from tests.browser.conftest import LabServer, start_lab
from tests.browser.notebook_page import NotebookPage
from tests.browser.test_chat_browser import REACT_REMOVE_CHILD, Chat

pytestmark = pytest.mark.jupyter_ai

PERSONA = "jupyter-ai-personas::jupyter_superfluid::SuperfluidPersona"
QUESTIONS = ["What is a prefix cache?", "And why is it warm?"]
FINISHED = ("completed", "incomplete")
# Where each UI opens a .chat file, and its main area (the panel's own chat is elsewhere).
OPEN = {"lab": "lab/tree/{path}", "notebook": "edit/{path}"}
MAIN = {"lab": "#jp-main-dock-panel", "notebook": "#main-panel"}


@pytest.fixture(scope="module")
def ai_lab(sf_model_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """``jupyter lab`` with this extension on a tiny model and Jupyter AI beside it."""
    base = tmp_path_factory.mktemp("ai-lab")
    args = [f"--Superfluid.models={TINY_MODELS[0]}"]
    args += [f"--Superfluid.model_cache_dir={sf_model_cache}"]
    args += ["--SuperfluidPersona.max_output_tokens=24"]
    server = start_lab(base, args, jupyter_env(base))
    try:
        yield server
    finally:
        server.stop()


def chat_conversation(lab: LabServer, path: str, timeout: float = 120) -> dict[str, Any]:
    """The server's conversation for the ``.chat`` file ``path``, once the persona made it."""
    deadline = time.monotonic() + timeout
    with lab.api() as api:
        while time.monotonic() < deadline:
            listing = api.get("v1/conversations", params={"limit": 100}).json()["data"]
            found = [c for c in listing if c["metadata"].get("jupyter_ai_chat") == path]
            if found:
                assert len(found) == 1, found
                return dict(found[0])
            time.sleep(0.2)
    raise TimeoutError(f"no conversation for {path}:\n{lab.log()[-3000:]}")


def stored_turns(lab: LabServer, conv_id: str, count: int, timeout: float = 120) -> list[dict]:
    """The conversation's responses, oldest first, once ``count`` of them are finished
    (completed, or incomplete at the persona's token cap)."""
    deadline = time.monotonic() + timeout
    with lab.api() as api:
        while time.monotonic() < deadline:
            tree = api.get(f"v1/conversations/{conv_id}/responses").json()["data"]
            turns = [api.get(f"v1/responses/{r['id']}").json() for r in tree]
            if len(turns) == count and all(t["status"] in FINISHED for t in turns):
                return turns
            time.sleep(0.2)
    raise TimeoutError(f"{conv_id} has no {count} finished responses")


def answers(turns: list[dict]) -> list[str]:
    """The text of each stored answer, as the persona shows it (an empty one is said)."""
    messages = [[i for i in t["output"] if i["type"] == "message"] for t in turns]
    texts = ["".join(p["text"] for item in items for p in item["content"]) for items in messages]
    return [text or EMPTY_ANSWER for text in texts]


def persona_bodies(lab: LabServer, path: str, count: int, timeout: float = 60) -> list[str]:
    """The persona's message bodies in the ``.chat`` file jupyterlab-chat saves, once
    there are ``count`` (a file caught mid-write is read again)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            messages = json.loads((lab.root / path).read_text()).get("messages", [])
        except ValueError:
            messages = []
        bodies = [m["body"] for m in messages if m["sender"] == PERSONA]
        if len(bodies) == count:
            return bodies
        time.sleep(0.2)
    raise TimeoutError(f"the saved {path} has no {count} persona messages")


def ask(page: Any, ui: str, text: str) -> None:
    """Type a message into the open chat's input and send it."""
    box = page.locator(f"{MAIN[ui]} textarea[placeholder^='Type a chat message']").first
    box.click()
    box.fill(text)
    box.press("Enter")


@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_the_persona_answers_in_jupyter_ais_chat_as_a_warm_conversation(
    ui: str,
    ai_lab: LabServer,
    chromium: Any,
    artifacts: Path,
    baseline_errors: Callable[[str], set[str]],
) -> None:
    chat_path = f"ideas-{ui}.chat"
    with ai_lab.api() as api:
        empty = {"type": "file", "format": "text", "content": ""}
        created = api.put(f"api/contents/{chat_path}", json=empty)
        assert created.status_code == 201, created.text
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    nb = NotebookPage(page, ai_lab, ui, chat_path)  # its console errors
    skew: list[str] = []  # module federation's word that one @jupyter/chat was forced on both
    page.on("console", lambda m: skew.append(m.text) if "@jupyter/chat" in m.text else None)
    try:
        page.goto(f"{ai_lab.url}{OPEN[ui].format(path=chat_path)}?token={ai_lab.token}")
        composer = page.locator(f"{MAIN[ui]} .jp-chat-input-container")
        expect(composer).to_contain_text("Superfluid", timeout=60_000)  # the picked persona
        ask(page, ui, QUESTIONS[0])
        conv = chat_conversation(ai_lab, chat_path)
        assert conv["metadata"]["title"] == QUESTIONS[0]
        [first] = stored_turns(ai_lab, conv["id"], 1)
        replies = page.locator(f"{MAIN[ui]} .jp-chat-message", has_text="Superfluid")
        expect(replies).to_have_count(1, timeout=30_000)
        ask(page, ui, QUESTIONS[1])
        turns = stored_turns(ai_lab, conv["id"], 2)
        expect(replies).to_have_count(2, timeout=30_000)
        # What the chat shows (and saved) is what the server stored, answer by answer.
        assert persona_bodies(ai_lab, chat_path, 2) == answers(turns)
        assert turns[0]["id"] == first["id"] and turns[1]["previous_response_id"] == first["id"]
        assert turns[1]["usage"]["input_tokens_details"]["cached_tokens"] > 0  # warm
        page.screenshot(path=artifacts / f"jupyter-ai-chat-{ui}-light.png")
        nb.theme("JupyterLab Dark")
        page.screenshot(path=artifacts / f"jupyter-ai-chat-{ui}-dark.png")
        nb.theme("JupyterLab Light")
        # This extension's panel lists the chat beside its own, titled by its first message.
        chat = Chat(nb)
        chat.open_from_palette()
        listed = chat.panel.locator(f".sf-chat-item[data-id='{conv['id']}']")
        expect(listed).to_contain_text(QUESTIONS[0])
        page.screenshot(path=artifacts / f"jupyter-ai-chat-{ui}-in-panel.png")
        # Both chat front-ends side by side, and no error the UI does not show without us.
        # Except React's "removeChild" race in @jupyter/chat's streamed message (seen in
        # jupyterlab-chat's own UI too, once in six runs here), as in the panel's test.
        ours = {e for e in nb.errors if REACT_REMOVE_CHILD not in e}
        assert ours <= baseline_errors(ui), nb.details
        assert skew == []  # each runs on its own @jupyter/chat (ours is not shared)
    finally:
        context.close()
