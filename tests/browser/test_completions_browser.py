"""Inline completions in a real browser: ghost text in a code cell, Tab accepts, typing on aborts.

JupyterLab 4 and Notebook 7 on a real server. The provider's settings go through the
settings registry's REST API (as the settings editor writes them): the slow model
(~200 tokens/s), greedy decoding, multi-line, no debounce. The cell's text is one whose
greedy continuation runs long, so each completion is still streaming while the test
types on: the superseded request is aborted by the browser, and the engine stops.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest
from playwright.sync_api import expect
from support.engine_processes import settled_tokens, tokens_generated

from tests.browser.conftest import SLOW, LabServer
from tests.browser.notebook_page import NotebookPage, write_notebook

SETTINGS = "lab/api/settings/@jupyterlab/completer-extension:inline-completer"
LONG = 4000  # tokens a completion may run: ~20 s on the slow model, far past each step
STILL_STREAMING = 1000  # ~5 s of the slow model: the first completion outlasts typing on
CANDIDATES = ["value = math.", "total = 0\nfor i in range(", "def area(r):\n    return ", "x = ["]
GHOST = ".jp-GhostText"
SOME_TEXT = re.compile(r"\S")


def long_cell(lab: LabServer, typed: str) -> str:
    """A cell text whose greedy continuation, once ``typed`` is typed at its end, runs
    to ``STILL_STREAMING`` tokens on the slow model (no end-of-text on the way).

    The prompt checked is the very one the editor will send: a continuation that ended
    early would be over before the test types on, and nothing would be left to abort.
    """
    with lab.api() as api:
        api.timeout = httpx.Timeout(300)  # a busy machine is slow to generate them
        for text in CANDIDATES:
            prompt = "import math\n\n" + text + typed
            body = {"model": SLOW, "prompt": prompt, "max_tokens": STILL_STREAMING}
            answer = api.post("v1/completions", json={**body, "temperature": 0})
            answer.raise_for_status()
            if answer.json()["usage"]["completion_tokens"] == STILL_STREAMING:
                return text
    pytest.fail(f"no cell text in {CANDIDATES} runs to {STILL_STREAMING} tokens greedily")


def configure(lab: LabServer, **provider: Any) -> None:
    """The inline completer's settings, with this provider's as given."""
    raw = {"providers": {"jupyter-superfluid": {"enabled": True, **provider}}}
    with lab.api() as api:
        answer = api.put(SETTINGS, json={"raw": json.dumps(raw)})
        assert answer.status_code == 204, answer.text


@pytest.fixture
def completer(lab: LabServer) -> Any:
    """The provider on the slow model, streaming long; the settings are reset afterwards."""
    configure(
        lab, model=SLOW, maxTokens=LONG, multiline=True, temperature=0, debouncerDelay=0,
        timeout=60000,
    )  # fmt: skip
    yield
    with lab.api() as api:
        api.put(SETTINGS, json={"raw": "{}"})


def completion_requests(page: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """The bodies of the page's /v1/completions requests, and the URLs of the aborted ones."""
    bodies: list[dict[str, Any]] = []
    failed: list[str] = []

    def ours(request: Any) -> bool:
        return urlparse(request.url).path.endswith("/v1/completions")

    def sent(request: Any) -> None:
        if ours(request):
            bodies.append(json.loads(request.post_data or "{}"))

    def aborted(request: Any) -> None:
        if ours(request):
            failed.append(request.failure or "")

    page.on("request", sent)
    page.on("requestfailed", aborted)
    return bodies, failed


def cell_source(nb: NotebookPage, index: int) -> str:
    """A cell's source as the notebook model holds it, once the editor has it."""
    nb.page.wait_for_timeout(300)
    return str(
        nb.page.evaluate(
            "i => window.jupyterapp.shell.currentWidget.content.widgets[i].model"
            ".sharedModel.getSource()",
            index,
        )
    )


def server(lab: LabServer) -> tuple[str, str, dict[str, str]]:
    """The server URL, the model and the token header for the engine counters."""
    return lab.url.rstrip("/"), SLOW, {"Authorization": f"token {lab.token}"}


def type_at_end(nb: NotebookPage, index: int, text: str) -> None:
    """Click into a cell's editor, go to its end and type ``text`` key by key."""
    nb.cell(index).locator(".jp-InputArea-editor").click()
    nb.page.keyboard.press("Control+End")
    nb.page.keyboard.type(text)


def check_failure_stays_out_of_the_editor(nb: NotebookPage, lab: LabServer) -> None:
    """A model that cannot answer shows nothing in the editor: only the status-bar note
    (JupyterLab's; Notebook 7 has no status bar)."""
    configure(lab, model="no-such-model", debouncerDelay=0, multiline=True, timeout=60000)
    nb.page.keyboard.press("Escape")
    nb.page.keyboard.press("Control+s")  # saved, so the reload asks nothing
    nb.page.wait_for_timeout(1500)
    nb.open(watch=False)  # an open page does not see settings written from outside
    bodies, _ = completion_requests(nb.page)
    before = cell_source(nb, 1)
    type_at_end(nb, 1, "z")
    deadline = time.monotonic() + 30
    while not any(b.get("model") == "no-such-model" for b in bodies):
        assert time.monotonic() < deadline, "no completion request for the unknown model"
        nb.page.wait_for_timeout(100)
    if nb.ui == "lab":
        status = nb.page.locator(".jp-superfluid-completion-status")
        expect(status).to_have_attribute("data-state", "failed", timeout=30_000)
        expect(status).to_contain_text("no-such-model")
    nb.page.wait_for_timeout(500)
    assert all(not t.strip() for t in nb.page.locator(GHOST).all_text_contents())  # no text
    assert cell_source(nb, 1) == before + "z"


@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_ghost_text_tab_accepts_and_typing_on_aborts(
    ui: str, lab: LabServer, chromium: Any, artifacts: Path, completer: Any
) -> None:
    text = long_cell(lab, typed="a")
    path = f"completions-{ui}.ipynb"
    write_notebook(lab.root / path, ["import math", text])
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    bodies, failed = completion_requests(page)
    nb = NotebookPage(page, lab, ui, path)
    try:
        nb.open(watch=False)
        before = tokens_generated(*server(lab))
        type_at_end(nb, 1, "a")
        ghost = page.locator(GHOST)
        # The first completion streams in (its first tokens take a while on a busy machine).
        expect(ghost.first).to_have_text(SOME_TEXT, timeout=60_000)
        first = bodies[-1]
        # The earlier cell is the stable prefix, then the cell up to the cursor.
        assert first["prompt"] == "import math\n\n" + text + "a", first
        assert (first["model"], first["max_tokens"], first["stream"]) == (SLOW, LONG, True)
        assert "suffix" not in first and "stop" not in first  # cursor at the end; multi-line
        type_at_end(nb, 1, "b")  # typing on supersedes the streaming request
        expect(ghost.first).to_have_text(SOME_TEXT, timeout=60_000)
        assert bodies[-1]["prompt"] == first["prompt"] + "b"
        deadline = time.monotonic() + 30
        while not failed and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        assert failed and "ABORTED" in failed[0].upper(), failed  # the browser aborted it
        shown = ghost.first.text_content() or ""
        page.screenshot(path=artifacts / f"completions-{ui}-ghost.png")
        page.keyboard.press("Tab")  # accepts the ghost text
        # The cell's source (the editor draws control characters as placeholders).
        accepted = cell_source(nb, 1)
        assert accepted.startswith(text + "ab" + shown[:3]) and len(accepted) > len(text) + 2
        page.screenshot(path=artifacts / f"completions-{ui}-accepted.png")
        nb.theme("JupyterLab Dark")
        type_at_end(nb, 1, "c")
        expect(ghost.first).to_have_text(SOME_TEXT, timeout=60_000)
        page.screenshot(path=artifacts / f"completions-{ui}-ghost-dark.png")
        nb.theme("JupyterLab Light")
        check_failure_stays_out_of_the_editor(nb, lab)
    finally:
        context.close()  # closing the page aborts what still streams
    # Nothing generates any more, long before either request could have run to its cap.
    generated = settled_tokens(*server(lab)) - before - 8
    assert 0 < generated < LONG
