"""Every demo notebook runs end to end in a kernel that a live Jupyter server started.

The server runs the extension on the built-in tiny models (``jp_server_config`` in
tests/conftest.py), under a base URL and with token auth. The kernel is the server's
own (``POST api/kernels``), so the notebooks' zero-config client finds the server as it
would in JupyterLab. A notebook fails on any error output or stderr text, and then its
key outputs are checked. The tiny models write gibberish, so these checks (and the
notebooks' own asserts) are about structure: ids, counts, tool results, validated
objects, event ids.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from nbformat import NotebookNode

from jupyter_superfluid.notebook import client as discovery

from .runner import NOTEBOOKS, WIDGET_VIEW, cell_outputs, execute, problems, read_notebook, stdout

CHATML = "superfluid/tiny-chatml"
QWEN = "superfluid/tiny-qwen3"
# SUPERFLUID_MODEL for each notebook; None lets it pick the first served model that loads.
MODELS: dict[str, str | None] = {
    "01-quickstart": None,
    "02-respond-magic": QWEN,  # reasoning
    "03-branching": CHATML,
    "04-tools": QWEN,  # tool calls need a template that renders them
    "05-structured-output": CHATML,
    "06-lmsp": CHATML,
    "07-chat-completions": CHATML,
}
ID = r"(resp_[0-9a-f]+)"
Runner = Callable[[str], Awaitable[NotebookNode]]


def grab(pattern: str, text: str) -> Any:
    """The group(s) of the first line matching ``pattern``; fails when none does."""
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"no line matches {pattern!r} in:\n{text}"
    return match.group(1) if match.re.groups == 1 else match.groups()


def value(text: str) -> Any:
    """A printed value: JSON, else a Python literal (a dict's repr)."""
    try:
        return json.loads(text)
    except ValueError:
        return ast.literal_eval(text)


def widget_shown(nb: NotebookNode, source_start: str) -> bool:
    """Whether the cell starting with ``source_start`` displayed a widget."""
    return any(WIDGET_VIEW in out.get("data", {}) for out in cell_outputs(nb, source_start))


@pytest.fixture
def run(jp_serverapp: Any, jp_fetch: Any, monkeypatch: pytest.MonkeyPatch) -> Runner:
    """Execute a notebook in a kernel of the live server, with that notebook's model."""

    async def run_notebook(name: str) -> NotebookNode:
        for var in (discovery.ENV_BASE_URL, discovery.ENV_API_KEY, "SUPERFLUID_WIDGETS"):
            monkeypatch.delenv(var, raising=False)  # the kernel inherits this environment
        model = MODELS[name]
        if model:
            monkeypatch.setenv(discovery.ENV_MODEL, model)
        else:
            monkeypatch.delenv(discovery.ENV_MODEL, raising=False)
        r = await jp_fetch("api", "kernels", method="POST", body=json.dumps({"name": "python3"}))
        kernel_id = json.loads(r.body)["id"]
        kernel = jp_serverapp.kernel_manager.get_kernel(kernel_id)
        nb = read_notebook(name)
        try:
            await execute(nb, kernel.connection_file)
        finally:
            await jp_fetch("api", "kernels", kernel_id, method="DELETE")
        assert not problems(nb), "\n".join(problems(nb))
        return nb

    return run_notebook


def test_notebooks_are_all_tested_and_committed_clean() -> None:
    assert sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")) == sorted(MODELS)
    for name in MODELS:
        nb = read_notebook(name)
        code = [cell for cell in nb.cells if cell.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), name
        first = nb.cells[0]
        assert first.cell_type == "code", name  # it says which model, and picks it
        for words in ("Qwen3-0.6B", "SUPERFLUID_MODEL", "gibberish", "MODEL = pick_model()"):
            assert words in first.source, (name, words)


async def test_01_quickstart(run: Runner, jp_fetch: Any) -> None:
    out = stdout(await run("01-quickstart"))
    assert f"model: {CHATML}" in out  # the first served model that loads
    assert "NOTE: a built-in tiny test model is active" in out
    first = grab(rf"^response id: {ID}$", out)
    assert grab(rf"^streamed response id: {ID}$", out) != first
    second, previous = grab(rf"^continued: {ID} from {ID}$", out)
    assert previous == first
    assert int(grab(r"^prompt tokens: \d+, cached: (\d+)$", out)) > 0
    assert grab(r"^x-superfluid-warm: (\d+)$", out) == grab(r"^cached_tokens: +(\d+)$", out)
    assert "same text: True" in out
    assert grab(rf"^async response id: {ID}$", out)
    stored = json.loads((await jp_fetch("v1", "responses", second)).body)
    assert stored["previous_response_id"] == first and stored["model"] == CHATML


async def test_02_respond_magic(run: Runner) -> None:
    nb = await run("02-respond-magic")
    out = stdout(nb)
    first = grab(rf"^response id: {ID}$", out)
    assert grab(rf"^continued: {ID} from {ID}$", out)[1] == first
    assert re.search(rf"^stored in `lisbon`: {ID} \| a new conversation: True$", out, re.M)
    assert int(grab(r"^reasoning characters: (\d+)$", out)) > 0  # tiny-qwen3 thinks
    assert grab(rf"^branch: {ID} from {ID}$", out)[1] == first
    assert "conversation: continues resp_" in out
    assert grab(rf"^LMSP response id: {ID}$", out)
    assert widget_shown(nb, "%respond tree")


async def test_03_branching(run: Runner, jp_fetch: Any) -> None:
    nb = await run("03-branching")
    out = stdout(nb)
    counts = [int(n) for n in re.findall(r"^nodes: (\d+)$", out, re.M)]
    assert counts == [3, 4, 5]
    assert int(grab(r"^nodes after delete: (\d+)$", out)) == 4
    assert widget_shown(nb, "tree = ConversationTree") and widget_shown(nb, "%respond tree")
    listing = json.loads((await jp_fetch("v1", "responses")).body)["data"]
    assert len(listing) == 4  # root, two branches, the magic's; the drink was deleted


STOCK = {"apples": 12, "pears": 0, "plums": 31}
PRICES = {"apples": 0.5, "pears": 0.8, "plums": 0.3}


def expected_result(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """What the notebook's tool returns for these arguments."""
    fruit = arguments["fruit"]
    if name == "in_stock":
        return {"fruit": fruit, "count": STOCK[fruit]}
    count = arguments["count"]
    return {"fruit": fruit, "count": count, "euros": round(PRICES[fruit] * count, 2)}


async def test_04_tools(run: Runner) -> None:
    out = stdout(await run("04-tools"))
    results = re.findall(r"^tool result: (in_stock|quote)\((\{.*\})\) -> (.*)$", out, re.M)
    assert len(results) >= 2, out  # the magic's loop, and the round by hand
    for name, arguments, result in results:
        assert value(result) == expected_result(name, json.loads(arguments))
    assert int(grab(r"^requests in the loop: (\d+)$", out)) >= 2
    assert "tool result: PermissionError: orders are closed on Sundays" in out


async def test_05_structured_output(run: Runner) -> None:
    out = stdout(await run("05-structured-output"))
    recipes = [value(r) for r in re.findall(r"^validated: Recipe (\{.*\})$", out, re.M)]
    assert len(recipes) == 2  # from --schema, and from responses.parse
    for recipe in recipes:
        assert set(recipe) == {"name", "minutes", "vegetarian", "difficulty", "ingredients"}
        assert recipe["difficulty"] in ("easy", "medium", "hard")
        assert 1 <= len(recipe["ingredients"]) <= 5 and len(recipe["name"]) <= 40
    verdict = value(grab(r"^validated dict: (\{.*\})$", out))
    assert set(verdict) == {"answer", "sure"} and verdict["answer"] in ("yes", "no")
    assert "validated: Recipe | format: json_schema Recipe" in out


async def test_06_lmsp(run: Runner) -> None:
    out = stdout(await run("06-lmsp"))
    assert grab(r"^versions: (\['1\.0'\])", out)
    assert grab(rf"^response id: {ID} \| status: \w+$", out)
    assert "status code: 202" in out
    assert grab(r"^read before the drop: (.*)$", out) == "[1, 2, 3]"
    start, end, final = grab(r"^resumed after event 3: got (\d+)\.\.(\d+), ending (\S+)$", out)
    assert int(start) == 4 and final in ("response.completed", "response.incomplete")
    assert grab(r"^task: \w+ \| last event id: (\d+) \|", out) == end
    after, tail = grab(r"^\?after= (\d+) -> (.*)$", out)
    assert int(after) == int(end) - 2 and [e[0] for e in value(tail)] == [int(end) - 1, int(end)]
    first, retry = grab(rf"^first: {ID} \| retry: {ID} \| replayed: true$", out)
    assert first == retry
    assert "422 application/problem+json" in out
    task, retried = grab(r"^task: (task_\w+) \| retried: (task_\w+)$", out)
    assert task == retried


async def test_07_chat_completions(run: Runner) -> None:
    out = stdout(await run("07-chat-completions"))
    assert grab(r"^completion id: (chatcmpl-\w+) \| finish: \w+$", out)
    assert int(grab(r"^chunks: (\d+) \|", out)) > 1
    assert re.search(r"^chat completions +3 +\d+ +\d+$", out, re.M)  # the history, resent
    assert re.search(r"^responses +1 +\d+ +\d+$", out, re.M)  # only the new message
    pick = value(grab(r"^parsed: (\{.*\})$", out))
    assert pick["colour"] in ("red", "green", "blue") and isinstance(pick["bright"], bool)
