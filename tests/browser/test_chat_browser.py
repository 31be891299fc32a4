"""The chat panel in a real browser: JupyterLab 4 and Notebook 7.

One notebook per UI, with a cell that raises. The panel opens from the command
palette; a message to the slow model streams in (the answer grows while it streams)
and is stored in a conversation; a second one is stopped mid-stream, and the server
stores nothing of it; after a page reload the chat is still there; editing the first
message starts a second branch in the tree, and clicking the first branch's node shows
it again; "Explain this error" on the raising cell sends its traceback as a context
item (seen in the request the page sent, and in the stored items); a function defined
in the kernel is offered as a tool, the model's call to it waits for "Run in kernel",
then runs in the kernel and its output continues the answer; picking a model
that is still downloading from the hub on loopback shows its progress bar at 50%.
Screenshots in light and dark themes in ``test-artifacts/``; structure and ids are
asserted, never the model's words.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from support.hub_server import REPO
from support.local_hub import LocalHub

from jupyter_superfluid.notebook.tools import tool_output
from tests.browser.conftest import SLOW, LabServer
from tests.browser.notebook_page import NotebookPage, write_notebook

PANEL = "#jupyter-superfluid-chat"
QWEN = "superfluid/tiny-qwen3"
SETTINGS = "lab/api/settings/jupyter-superfluid:chat"
STREAMED = 160  # tokens: most of a second on the slow model

# Records the last answer's text length, while it streams, on every DOM change.
WATCH = """panel => {
  window.__sfChatSeen = [];
  const root = document.querySelector(panel);
  const snap = () => {
    const footers = root.querySelectorAll('.sf-chat-footer');
    const last = footers[footers.length - 1];
    const bodies = root.querySelectorAll('.jp-chat-message .jp-chat-rendered-message');
    const body = bodies[bodies.length - 1];
    if (!last || !body || last.dataset.status !== 'in_progress') return;
    const n = body.textContent.length;
    if (n && !window.__sfChatSeen.includes(n)) window.__sfChatSeen.push(n);
  };
  new MutationObserver(snap).observe(
    root, {subtree: true, childList: true, characterData: true, attributes: true}
  );
}"""


def set_settings(lab: LabServer, **values: Any) -> None:
    """The chat's user settings, through JupyterLab's settings API.

    A page reads them when it loads (a change made elsewhere is not pushed to it).
    """
    with lab.api() as api:
        answer = api.put(SETTINGS, json={"raw": json.dumps(values)})
        assert answer.status_code == 204, answer.text


def items(lab: LabServer, conv_id: str) -> list[dict[str, Any]]:
    """The stored items of the conversation's current branch."""
    with lab.api() as api:
        answer = api.get(f"v1/conversations/{conv_id}/items", params={"order": "asc"})
        answer.raise_for_status()
        return answer.json()["data"]


def responses(lab: LabServer, conv_id: str) -> list[dict[str, Any]]:
    with lab.api() as api:
        answer = api.get(f"v1/conversations/{conv_id}/responses")
        answer.raise_for_status()
        return answer.json()["data"]


def record(request: Any, sent: list[dict[str, Any]], reads: list[str] | None = None) -> None:
    """Keep the body of each ``POST v1/responses`` the page sends, and its conversation reads."""
    path = request.url.split("?")[0]
    if request.method == "POST" and path.endswith("/v1/responses"):
        sent.append(json.loads(request.post_data or "{}"))
    elif reads is not None and request.method == "GET" and "/v1/conversations/conv_" in path:
        reads.append(path)


class Chat:
    """The panel in one page."""

    def __init__(self, nb: NotebookPage) -> None:
        self.nb, self.page = nb, nb.page
        self.panel = self.page.locator(PANEL)

    def open_from_palette(self) -> None:
        palette = self.page.locator(".lm-CommandPalette-input")
        for _ in range(5):  # a page still settling may miss the first press
            self.page.keyboard.press("Control+Shift+C")
            try:
                expect(palette).to_be_visible(timeout=4_000)
                break
            except AssertionError:
                continue
        expect(palette).to_be_visible()
        palette.fill("Superfluid: Open chat")
        self.page.locator(".lm-CommandPalette-item", has_text="Superfluid: Open chat").first.click()
        expect(self.panel).to_be_visible()
        expect(self.panel.locator(".sf-chat-model-select")).to_be_visible()

    def pick(self, model: str) -> None:
        self.panel.locator(".sf-chat-model-select").select_option(model)
        expect(self.panel.locator(".sf-chat-model")).to_have_attribute(
            "data-state", "loaded", timeout=60_000
        )

    @property
    def input(self) -> Any:
        return self.panel.locator(".jp-chat-input-container textarea").first

    def send(self, text: str) -> None:
        self.input.click()
        self.input.fill(text)
        self.input.press("Enter")

    def footers(self) -> Any:
        return self.panel.locator(".sf-chat-footer")

    def last_footer(self) -> Any:
        return self.footers().last

    def conversation_id(self) -> str:
        current = self.panel.locator(".sf-chat-item[data-current='true']")
        expect(current).to_have_count(1)
        return current.get_attribute("data-id") or ""

    def wait_done(self, timeout: float = 120_000) -> str:
        """Until the last answer is stored; its response id."""
        footer = self.last_footer()
        expect(footer).to_have_attribute("data-status", "completed", timeout=timeout)
        expect(footer).to_have_attribute("data-response-id", __import__("re").compile("^resp_"))
        return footer.get_attribute("data-response-id") or ""

    def view(self) -> dict[str, Any]:
        """What the panel shows of the chat: the messages' texts, answers, tree and head."""
        tree = self.panel.locator(".sf-chat-tree-node")
        return {
            "texts": self.panel.locator(".jp-chat-rendered-message").all_inner_texts(),
            "answers": [f.get_attribute("data-response-id") for f in self.footers().all()],
            "tree": sorted(
                tuple(n.get_attribute(a) for a in ("data-id", "data-current", "title"))
                for n in tree.all()
            ),
        }

    def watch(self) -> None:
        """Record, in the page, each length the last answer shows (on every DOM change)."""
        self.page.evaluate(WATCH, PANEL)

    def streamed_lengths(self) -> list[int]:
        """The distinct lengths the last answer showed while it streamed."""
        self.wait_done()
        return self.page.evaluate("window.__sfChatSeen")

    def shots(self, artifacts: Path, name: str) -> None:
        """The panel in the light and the dark theme."""
        for theme, short in (("JupyterLab Light", "light"), ("JupyterLab Dark", "dark")):
            self.nb.theme(theme)
            self.panel.screenshot(path=artifacts / f"chat-{name}-{short}.png")
        self.nb.theme("JupyterLab Light")


@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_chat_in_the_browser(
    ui: str, lab: LabServer, browser_hub: LocalHub, chromium, artifacts: Path, baseline_errors
) -> None:
    path = f"chat-{ui}.ipynb"
    write_notebook(lab.root / path, ["x = 1", "1 / 0", ADD])
    set_settings(lab, defaultModel=SLOW, maxOutputTokens=STREAMED, temperature=0)
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    sent: list[dict[str, Any]] = []
    reads: list[str] = []
    page.on("request", lambda r: record(r, sent, reads))
    nb = NotebookPage(page, lab, ui, path)
    chat = Chat(nb)
    try:
        nb.open(watch=False)
        chat.open_from_palette()
        chat.pick(SLOW)
        conv_id, first = check_stream(chat, lab, sent, reads)
        shown = chat.view()  # the first turn as the stream applied it
        check_stop(chat, lab, conv_id)
        chat.shots(artifacts, f"{ui}-answer")
        check_reload(nb, chat, conv_id, first, shown)
        check_branch(chat, lab, conv_id, first, artifacts, ui)
        check_error_context(nb, chat, lab, sent, artifacts, ui)
        check_tool_call(nb, chat, lab, sent, artifacts, ui)
        check_model_progress(chat, lab, browser_hub, ui, artifacts)
        # None of our own. One exception, seen once in four runs on JupyterLab: React's
        # "removeChild ... not a child of this node" while @jupyter/chat 0.20 re-renders a
        # message it streams into; it breaks nothing the steps check (an open issue).
        ours = {e for e in nb.errors if REACT_REMOVE_CHILD not in e}
        assert ours <= baseline_errors(ui), nb.errors
    except Exception:
        page.screenshot(path=artifacts / f"chat-{ui}-failure.png", full_page=True)
        raise
    finally:
        browser_hub.release()
        (artifacts / f"chat-{ui}-console-errors.txt").write_text("\n".join(nb.details))
        (artifacts / f"chat-{ui}-server.log").write_text(lab.log())
        context.close()


def check_stream(
    chat: Chat, lab: LabServer, sent: list[dict[str, Any]], reads: list[str]
) -> tuple[str, str]:
    """A message streams in, and is stored in a new conversation, shown without a read."""
    chat.watch()
    chat.send("Count from one to twenty.")
    lengths = chat.streamed_lengths()
    assert len(lengths) >= 2, lengths  # it grew while streaming
    first = chat.wait_done()
    conv_id = chat.conversation_id()
    tree = chat.panel.locator(f".sf-chat-tree-node[data-id='{first}']")
    expect(tree).to_have_attribute("data-current", "true")  # the stream's turn, applied
    assert reads == [], reads  # the panel read nothing back after the answer
    assert conv_id.startswith("conv_")
    body = sent[-1]
    assert body["conversation"] == conv_id and body["model"] == SLOW
    assert body["max_output_tokens"] == STREAMED and body["temperature"] == 0  # the settings
    stored = items(lab, conv_id)
    assert [(i["type"], i.get("role")) for i in stored][:1] == [("message", "user")]
    assert any(i.get("role") == "assistant" for i in stored)
    return conv_id, first


REACT_REMOVE_CHILD = "Failed to execute 'removeChild' on 'Node'"


def check_stop(chat: Chat, lab: LabServer, conv_id: str) -> None:
    """Stop mid-stream: the server stores nothing of that turn."""
    before = items(lab, conv_id)
    chat.send("Write a very long story.")
    footer = chat.last_footer()
    expect(footer).to_have_attribute("data-status", "in_progress")
    message = chat.panel.locator(".jp-chat-message").last.locator(".jp-chat-rendered-message")
    expect(message).not_to_have_text("", timeout=60_000)
    stop = chat.panel.locator(".sf-chat-stop")
    expect(stop).to_be_enabled()
    stop.click()
    expect(footer).to_have_attribute("data-status", "stopped")
    expect(chat.panel.locator(".sf-chat-stopped")).to_be_visible()
    time.sleep(1)
    assert items(lab, conv_id) == before
    assert len(responses(lab, conv_id)) == 1


def reload(nb: NotebookPage, chat: Chat) -> None:
    """Load the page again, with the panel open."""
    nb.open(watch=False)
    try:  # the layout may restore the panel, a little after the notebook shows
        expect(chat.panel).to_be_visible(timeout=10_000)
    except AssertionError:
        chat.open_from_palette()


def check_reload(
    nb: NotebookPage, chat: Chat, conv_id: str, first: str, shown: dict[str, Any]
) -> None:
    """After a reload the chat is listed and shown again, from the server, as it was."""
    reload(nb, chat)
    expect(chat.panel.locator(f".sf-chat-item[data-id='{conv_id}']")).to_be_visible()
    expect(chat.panel.locator(f".sf-chat-item[data-id='{conv_id}']")).to_have_attribute(
        "data-current", "true"
    )
    expect(chat.footers()).to_have_count(1)
    expect(chat.last_footer()).to_have_attribute("data-response-id", first)
    expect(chat.panel.locator(f".sf-chat-tree-node[data-id='{first}']")).to_have_count(1)
    assert chat.view() == shown  # the stream's turn as applied is the stored one (the stop's: not)


def check_branch(
    chat: Chat, lab: LabServer, conv_id: str, first: str, artifacts: Path, ui: str
) -> None:
    """Editing the first message starts a second branch; clicking the first shows it."""
    message = chat.panel.locator(
        ".jp-chat-message", has=chat.page.locator(".sf-chat-user-info")
    ).first
    message.hover()
    message.get_by_role("button", name="Edit").click()
    editor = message.locator("textarea").first
    editor.fill("Count from one to ten.")
    editor.press("Enter")
    second = chat.wait_done()
    assert second != first
    tree = chat.panel.locator(".sf-chat-tree")
    expect(tree.locator(".sf-chat-branch-count")).to_have_text("2")
    expect(tree.locator(".sf-chat-tree-node[data-leaf='true']")).to_have_count(2)
    expect(tree.locator(f".sf-chat-tree-node[data-id='{second}']")).to_have_attribute(
        "data-current", "true"
    )
    nodes = {r["id"]: r for r in responses(lab, conv_id)}
    assert (
        nodes[second]["previous_response_id"] is None
        and nodes[first]["previous_response_id"] is None
    )
    chat.shots(artifacts, f"{ui}-branches")
    tree.locator(f".sf-chat-tree-node[data-id='{first}']").click()
    expect(tree.locator(f".sf-chat-tree-node[data-id='{first}']")).to_have_attribute(
        "data-current", "true"
    )
    expect(chat.last_footer()).to_have_attribute("data-response-id", first)
    with lab.api() as api:
        assert api.get(f"v1/conversations/{conv_id}").json()["head_response_id"] == first


def check_error_context(
    nb: NotebookPage,
    chat: Chat,
    lab: LabServer,
    sent: list[dict[str, Any]],
    artifacts: Path,
    ui: str,
) -> None:
    """ "Explain this error" sends the cell's traceback first, as a context item with a chip."""
    chat.panel.locator(".sf-chat-new").click()
    expect(chat.footers()).to_have_count(0)
    cell = nb.run(1)
    expect(
        cell.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    ).to_have_count(1)
    cell.locator(".jp-InputArea-editor").click(button="right")
    nb.page.locator(".lm-Menu-item", has_text="Explain this error").click()
    expect(chat.panel.locator(".jp-chat-message .jp-chat-attachment").first).to_be_visible()
    chat.wait_done()
    body = sent[-1]
    context, question = body["input"][0], body["input"][-1]
    text = context["content"][0]["text"]
    assert context["role"] == "user" and context["content"][0]["type"] == "input_text"
    assert text.startswith(f'<notebook-context path="{nb.path}"') and "ZeroDivisionError" in text
    assert question["role"] == "user" and "previous_response_id" not in body
    conv_id = chat.conversation_id()
    stored = items(lab, conv_id)
    assert "ZeroDivisionError" in stored[0]["content"][0]["text"]
    chat.shots(artifacts, f"{ui}-error-context")


ADD = "def add(a: int, b: int) -> int:\n    return a + b"


def check_tool_call(
    nb: NotebookPage,
    chat: Chat,
    lab: LabServer,
    sent: list[dict[str, Any]],
    artifacts: Path,
    ui: str,
) -> None:
    """A function of the kernel is offered; its call waits for Run, then runs in the kernel."""
    set_settings(
        lab,
        defaultModel=QWEN,
        maxOutputTokens=200,
        temperature=0,
        offerKernelTools=True,
        toolChoice="required",
        reasoningEffort="none",  # else a thinking model may think to the budget first
    )
    reload(nb, chat)  # the page reads the settings
    nb.run(2)  # defines add() in the kernel
    chat.panel.locator(".sf-chat-new").click()
    chat.pick(QWEN)
    chat.send("Add two numbers.")
    call = chat.panel.locator(".sf-chat-call").first
    expect(call).to_have_attribute("data-state", "pending", timeout=60_000)
    first = sent[-1]
    assert [t["name"] for t in first["tools"]] == ["add"] and first["tool_choice"] == "required"
    assert first["reasoning"] == {"effort": "none"}
    chat.shots(artifacts, f"{ui}-tool-approval")
    call.locator(".sf-chat-call-run").click()
    expect(call).to_have_attribute("data-state", "done", timeout=60_000)
    chat.wait_done()
    followup = sent[-1]
    assert followup is not first and "tool_choice" not in followup  # auto after an output
    stored = items(lab, chat.conversation_id())
    made = next(i for i in stored if i["type"] == "function_call")
    ran = next(i for i in stored if i["type"] == "function_call_output")
    args = json.loads(made["arguments"])
    assert made["name"] == "add" and ran["call_id"] == made["call_id"]
    assert ran["output"] == tool_output(args["a"] + args["b"])  # what the kernel computed
    assert followup["input"] == [
        {"type": "function_call_output", "call_id": made["call_id"], "output": ran["output"]}
    ]
    expect(call.locator(".sf-chat-call-output")).to_have_text(ran["output"])
    set_settings(lab, defaultModel=SLOW, maxOutputTokens=STREAMED, temperature=0)


def check_model_progress(
    chat: Chat, lab: LabServer, hub: LocalHub, ui: str, artifacts: Path
) -> None:
    """Picking a model still downloading shows its progress; it loads once the hub lets go."""
    name = f"chat-{ui}.gguf"
    data = hub.state.files[f"{REPO}/{ui}.gguf"].data + b"\0" * 64  # bytes of its own
    hub.add(REPO, name, data)
    hub.pause_at(len(data) // 2)
    with lab.api() as api:
        added = api.post("superfluid/v1/models", json={"spec": f"hf:{REPO}/{name}", "load": False})
        assert added.status_code in (200, 201), added.text
        model_id = added.json()["id"]
    chat.panel.locator(".sf-chat-model-select").select_option(model_id)
    picker = chat.panel.locator(".sf-chat-model")
    expect(picker).to_have_attribute("data-state", "downloading", timeout=60_000)
    bar = picker.locator(".sf-bar[role=progressbar]")
    expect(bar).to_have_attribute("aria-valuenow", "50", timeout=60_000)
    if ui == "lab":  # Notebook 7 has no status bar
        status = chat.page.locator(".sf-chat-status")
        expect(status).to_contain_text(f"{model_id} · downloading 50%")
    chat.shots(artifacts, f"{ui}-model-progress")
    hub.release()
    expect(picker).to_have_attribute("data-state", "loaded", timeout=120_000)
    expect(bar).to_have_count(0)
