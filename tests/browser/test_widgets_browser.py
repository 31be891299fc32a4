"""The widgets in a real browser: JupyterLab 4 and Notebook 7, a real server, tiny models.

One notebook per UI: ``%load_ext``, a ``%%respond`` cell that streams (several updates
seen before it completes, usage shown), a second turn, a long generation stopped
with the Stop button (the server then has no such response), ``%respond tree`` (the
nodes drawn, the current one marked), a branch made by clicking (a sibling that
streams inline and joins the tree), screenshots in the light and dark themes, and
no errors in the console. The random-weight models write random text: the tests count
and check structure, never meaning. The streams the browser watches run on the slow
model (~200 tokens/s), with greedy decoding (temperature 0) of a prompt found to run
long, so each is still generating for as long as the step needs (seconds, not the
milliseconds a tiny model takes).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SLOW, LabServer
from tests.browser.notebook_page import NotebookPage, write_notebook

QWEN = "superfluid/tiny-qwen3"
PROMPTS = ["Tell me a long story.", "Once upon a time", "Lorem ipsum", "x", "Go on.", "Begin"]
BRANCHES = ["Another way", "Or else?", "Try again", "Go on.", "More", "And?"]
DONE = re.compile("^(completed|incomplete)$")
STREAMED = 400  # tokens of the streamed cell: ~2 s on the slow model
BRANCHED = 300  # tokens of the branch made in the tree


def long_input(lab: LabServer, candidates: list[str], tokens: int, previous: str = "") -> str:
    """The first input whose greedy continuation on the slow model runs ``tokens`` tokens."""
    with lab.api() as api:
        for text in candidates:
            body = {"input": text, "temperature": 0, "max_output_tokens": tokens, "store": False}
            body.update({"previous_response_id": previous} if previous else {"model": SLOW})
            answer = api.post("v1/responses", json=body)
            answer.raise_for_status()
            if answer.json()["usage"]["output_tokens"] >= tokens:
                return text
    pytest.fail(f"no input in {candidates} runs to {tokens} tokens with greedy decoding")


def cells(prompt: str) -> list[str]:
    """The notebook: load, stream, a second turn, a long one to stop, defaults, tree."""
    return [
        "%load_ext jupyter_superfluid",
        f"%%respond --new -m {SLOW} --temperature 0 --max-tokens {STREAMED}\n{prompt}",
        "%%respond --max-tokens 8 --seed 1\nAnd a short one.",
        f"%%respond --new -m {SLOW} --temperature 0 --max-tokens 12000\n{prompt}",
        f"%respond --temperature 0 --max-tokens {BRANCHED}",
        "%respond tree",
        'def lookup(id: int) -> dict:\n    """A customer by id."""\n    return {"name": "Ada"}',
        f"%%respond --new -m {QWEN} --tools lookup --tool-choice required --max-rounds 2"
        " --max-tokens 400 --seed 5\nWho is customer 7?",
    ]


def response_id(view) -> str:
    """The full response id a ResponseView shows (in its meta's title)."""
    meta = view.locator(".sf-response-meta")
    expect(meta).to_have_attribute("title", re.compile(r"^resp_[0-9a-f]{32}$"))
    return str(meta.get_attribute("title"))


@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_widgets_in_the_browser(
    ui: str, lab: LabServer, chromium, artifacts: Path, baseline_errors
) -> None:
    # Greedy: the stop cell's run is the streamed one's, longer; 2000 tokens are ~10 s.
    prompt = long_input(lab, PROMPTS, 2000)
    path = f"widgets-{ui}.ipynb"
    write_notebook(lab.root / path, cells(prompt))
    context = chromium.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    nb = NotebookPage(page, lab, ui, path)
    try:
        nb.open()
        nb.run(0)
        first = check_streaming(nb)
        second = response_id(nb.run(2).locator(".sf-response"))
        check_stop(nb, lab)
        nb.run(4)
        tree = check_tree(nb, first, second)
        check_branch(nb, lab, tree, prompt, (first, second))
        check_tool_cards(nb)
        shoot(nb, ui, artifacts)
        assert set(nb.errors) <= baseline_errors(ui), nb.errors  # none of our own
    except Exception:
        page.screenshot(path=artifacts / f"{ui}-failure.png", full_page=True)
        raise
    finally:
        (artifacts / f"{ui}-console-errors.txt").write_text("\n".join(nb.details))
        context.close()


def check_streaming(nb: NotebookPage) -> str:
    """A ``%%respond`` cell streams into a ResponseView and ends with usage."""
    view = nb.run(1).locator(".sf-response")
    expect(view).to_have_attribute("data-status", DONE)
    lengths = next(iter(nb.updates_seen().values()))
    final = len(view.locator(".sf-items").text_content() or "")
    assert len(lengths) >= 2 and max(lengths) <= final, lengths  # several updates, then done
    usage = view.locator(".sf-usage")
    output = usage.locator("[data-key=output] .sf-usage-value")
    assert int((output.text_content() or "0").replace(",", "")) == STREAMED
    for key in ("input", "cached", "speed"):
        expect(usage.locator(f"[data-key={key}] .sf-usage-value")).to_have_text(
            re.compile(r"^\d[\d,.]*$")
        )
    expect(view.locator("button.sf-stop")).to_be_hidden()
    assert view.locator(".sf-item-message > *").count() >= 1  # rendered as Markdown
    return response_id(view)


def check_stop(nb: NotebookPage, lab: LabServer) -> None:
    """Stop cancels a long generation: the server keeps no response for it."""
    cell = nb.run(3, wait=False)
    view = cell.locator(".sf-response")
    stop = view.locator("button.sf-stop")
    expect(stop).to_be_visible(timeout=30_000)
    expect(view.locator(".sf-item-message")).not_to_be_empty()
    stopped = response_id(view)
    stop.focus()
    nb.page.keyboard.press("Enter")  # the button works from the keyboard
    expect(view).to_have_attribute("data-status", "cancelled", timeout=30_000)
    expect(view.locator(".sf-error")).to_contain_text("cancelled")
    expect(stop).to_be_hidden()
    nb.wait_kernel_idle()
    with lab.api() as api:
        assert api.get(f"v1/responses/{stopped}").status_code == 404


def check_tree(nb: NotebookPage, first: str, second: str):
    """``%respond tree`` draws the conversation and marks the current node."""
    tree = nb.run(5).locator(".sf-tree")
    nodes = tree.locator("button.sf-node")
    expect(nodes).to_have_count(2)
    assert [nodes.nth(i).get_attribute("data-id") for i in range(2)] == [first, second]
    expect(tree.locator("button.sf-node-current")).to_have_attribute("data-id", second)
    expect(tree.locator(".sf-tree-count")).to_have_text("2 responses")
    nodes.first.click()  # selects it; then arrow keys move between the nodes
    expect(nodes.first).to_have_attribute("aria-selected", "true")
    nodes.first.press("ArrowDown")
    expect(nodes.nth(1)).to_be_focused()
    nodes.nth(1).press("ArrowLeft")  # to the parent
    expect(nodes.first).to_be_focused()
    return tree


def check_branch(nb: NotebookPage, lab: LabServer, tree, prompt: str, ids: tuple[str, str]) -> None:
    """Clicking a node, typing and pressing Branch streams a new sibling into the tree."""
    first, second = ids
    text = long_input(lab, BRANCHES, BRANCHED, previous=first)
    tree.locator(f"button.sf-node[data-id='{first}']").click()
    detail = tree.locator(f".sf-tree-detail[data-selected='{first}']")
    expect(detail.locator(".sf-detail-meta")).to_contain_text(SLOW)
    expect(detail.locator(".sf-input-item")).to_contain_text(prompt)
    expect(detail.locator(".sf-branch-submit")).to_have_text("Branch")
    detail.locator(".sf-branch-input").fill(text)
    detail.locator(".sf-branch-input").press("Enter")  # the form submits from the keyboard
    live = tree.locator(".sf-tree-live .sf-response")
    expect(live).to_have_attribute("data-status", DONE, timeout=60_000)
    views = nb.updates_seen()
    assert len(views[max(views)]) >= 2, views  # the branch streamed: several updates
    new = response_id(live)
    nodes = tree.locator("button.sf-node")
    expect(nodes).to_have_count(3)
    assert [nodes.nth(i).get_attribute("data-id") for i in range(3)] == [first, second, new]
    for sibling in (second, new):  # both continue the first: siblings at depth 2
        node = tree.locator(f"button.sf-node[data-id='{sibling}']")
        expect(node).to_have_attribute("aria-level", "2")
    expect(tree.locator("button.sf-node-current")).to_have_attribute("data-id", new)
    with lab.api() as api:
        assert api.get(f"v1/responses/{new}").json()["previous_response_id"] == first


def check_tool_cards(nb: NotebookPage) -> None:
    """A tool loop shows each call as a card with its arguments and the tool's output."""
    nb.run(6)
    view = nb.run(7).locator(".sf-response")
    expect(view).to_have_attribute("data-status", DONE)
    card = view.locator(".sf-item-call").first
    expect(card.locator(".sf-call-name")).to_have_text("lookup")
    expect(card.locator(".sf-call-args")).to_contain_text('"id":')
    expect(card.locator(".sf-call-output")).to_contain_text('"name": "Ada"')
    if view.locator(".sf-item-reasoning").count():  # thinking shows collapsed, opens on click
        summary = view.locator(".sf-item-reasoning summary").first
        expect(view.locator(".sf-reasoning-text").first).to_be_hidden()
        summary.click()
        expect(view.locator(".sf-reasoning-text").first).to_be_visible()


def shoot(nb: NotebookPage, ui: str, artifacts: Path) -> None:
    """Screenshots of both widgets in the light and the dark theme."""
    for theme, name in (("light", "JupyterLab Light"), ("dark", "JupyterLab Dark")):
        nb.theme(name)
        nb.cell(1).locator(".sf-response").screenshot(path=artifacts / f"{ui}-response-{theme}.png")
        nb.cell(5).locator(".sf-tree").screenshot(path=artifacts / f"{ui}-tree-{theme}.png")
        view = nb.cell(7).locator(".sf-response")
        view.screenshot(path=artifacts / f"{ui}-tools-{theme}.png")
