"""Drive a notebook in JupyterLab 4 or Notebook 7 as a person would: click, type, run.

``NotebookPage`` opens a notebook, waits for its kernel, runs cells with Shift+Enter,
records console errors, and watches every ResponseView in the page so a test can
tell how many distinct updates it showed while streaming.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from tests.browser.conftest import LabServer

UIS = {"lab": "lab/tree/{path}?reset&", "notebook": "notebooks/{path}?"}  # reset: no old tabs
CELLS = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell"

# Records (view id, status, text length) for every ResponseView on each DOM change.
WATCH = """() => {
  window.__sfSeen = [];
  let next = 0;
  const ids = new WeakMap();
  const snap = () => document.querySelectorAll('.sf-response').forEach(el => {
    if (!ids.has(el)) ids.set(el, next++);
    const items = el.querySelector('.sf-items');
    window.__sfSeen.push([ids.get(el), el.dataset.status, items ? items.textContent.length : 0]);
  });
  new MutationObserver(snap).observe(document.body, {
    subtree: true, childList: true, characterData: true,
    attributes: true, attributeFilter: ['data-status']
  });
}"""


def write_notebook(path: Path, cells: list[str]) -> None:
    """A notebook file with these code cells, for the python3 kernel."""
    nb = {
        "cells": [
            {"cell_type": "code", "metadata": {}, "source": src, "outputs": [],
             "execution_count": None, "id": f"cell-{i}"}
            for i, src in enumerate(cells)
        ],
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }  # fmt: skip
    path.write_text(json.dumps(nb))


class NotebookPage:
    """One notebook open in one UI, with console errors collected."""

    def __init__(self, page: Any, lab: LabServer, ui: str, path: str) -> None:
        self.page, self.lab, self.ui, self.path = page, lab, ui, path
        self.errors: list[str] = []  # one line each
        self.details: list[str] = []  # with stacks, for the artifacts
        page.on("console", self._console)
        page.on("pageerror", self._page_error)

    def _console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text}")
            self.details.append(f"console: {message.text} at {message.location}")

    def _page_error(self, exc: Any) -> None:
        self.errors.append(f"pageerror: {exc}")
        self.details.append(f"pageerror: {exc}\n{exc.stack}")

    def open(self, watch: bool = True) -> None:
        """Load the UI on the notebook, wait until its kernel is idle, watch the views."""
        url = self.lab.url + UIS[self.ui].format(path=self.path) + f"token={self.lab.token}"
        self.page.goto(url)
        self.page.locator(CELLS).first.wait_for(timeout=60_000)
        self.wait_kernel_idle()
        if watch:
            self.page.evaluate(WATCH)

    def wait_kernel_idle(self, timeout: float = 60) -> None:
        """Until the notebook's kernel (found through the sessions API) is idle."""
        deadline = time.monotonic() + timeout
        with self.lab.api() as api:
            while time.monotonic() < deadline:
                sessions = [s for s in api.get("api/sessions").json() if s["path"] == self.path]
                if sessions and sessions[0]["kernel"]["execution_state"] == "idle":
                    return
                time.sleep(0.2)
        raise TimeoutError(f"the kernel of {self.path} did not become idle")

    def cell(self, index: int) -> Any:
        """The locator of one cell."""
        return self.page.locator(CELLS).nth(index)

    def run(self, index: int, wait: bool = True, timeout: float = 60) -> Any:
        """Run a cell with Shift+Enter; by default wait until it has finished."""
        cell = self.cell(index)
        cell.locator(".jp-InputArea-editor").click()
        self.page.keyboard.press("Shift+Enter")
        if wait:
            prompt = cell.locator(".jp-InputArea-prompt")
            deadline = time.monotonic() + timeout
            while not re.search(r"\[\d+\]", prompt.inner_text()):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"cell {index} did not finish")
                time.sleep(0.1)
        return cell

    def updates_seen(self) -> dict[int, list[int]]:
        """For each ResponseView, the distinct text lengths it showed while streaming."""
        seen: dict[int, list[int]] = {}
        for view, status, length in self.page.evaluate("window.__sfSeen"):
            lengths = seen.setdefault(view, [])
            if status == "in_progress" and length and length not in lengths:
                lengths.append(length)
        return seen

    def theme(self, name: str) -> None:
        """Switch the theme through the application's own command."""
        self.page.evaluate(
            "name => window.jupyterapp.commands.execute('apputils:change-theme', {theme: name})",
            name,
        )
        self.page.wait_for_function(
            "name => document.body.dataset.jpThemeName === name", arg=name, timeout=30_000
        )
