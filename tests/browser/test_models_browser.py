"""Models from the notebook, in a real browser: JupyterLab 4 and Notebook 7.

One notebook per UI: ``%respond pull`` of a GGUF from the hub on loopback, held at half
so the progress bar is seen at 50% (then let go: the row turns "on disk");
``%respond models`` with every served model, where Load loads the pulled one, Use makes
it the magic's default (the next ``%%respond`` answers with it) and Remove (twice)
removes it; and a ``%%respond`` cell on a model still downloading, whose ResponseView
shows the download's bar, then streams. Screenshots of each in ``test-artifacts/``, and
no console errors of our own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect
from support.hub_server import REPO
from support.local_hub import LocalHub

from tests.browser.conftest import LabServer
from tests.browser.notebook_page import NotebookPage, write_notebook

CHATML = "superfluid/tiny-chatml"
DONE = re.compile("^(completed|incomplete)$")


def cells(ui: str) -> list[str]:
    """The notebook: load, pull, the models, a cell on the default, a cell on a late model."""
    return [
        "%load_ext jupyter_superfluid",
        f"%respond pull hf:{REPO}/{ui}.gguf",
        "%respond models",
        "%%respond --new --max-tokens 3 --seed 1\nHi",
        "from jupyter_superfluid.notebook.models import ModelsClient\n"
        f"ModelsClient().add('hf:{REPO}/{ui}-late.gguf')['state']",
        f"%%respond --new -m {ui}-late --max-tokens 3 --seed 1\nHello",
    ]


def size(lab_hub: LocalHub, name: str) -> int:
    return len(lab_hub.state.files[f"{REPO}/{name}.gguf"].data)


@pytest.mark.parametrize("ui", ["lab", "notebook"])
def test_models_in_the_browser(
    ui: str, lab: LabServer, browser_hub: LocalHub, chromium, artifacts: Path, baseline_errors
) -> None:
    path = f"models-{ui}.ipynb"
    write_notebook(lab.root / path, cells(ui))
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    nb = NotebookPage(page, lab, ui, path)
    try:
        nb.open(watch=False)
        nb.run(0)
        check_pull(nb, browser_hub, ui, artifacts)
        check_models(nb, ui, artifacts)
        check_waiting_cell(nb, browser_hub, ui, artifacts)
        assert set(nb.errors) <= baseline_errors(ui), nb.errors  # none of our own
    except Exception:
        page.screenshot(path=artifacts / f"models-{ui}-failure.png", full_page=True)
        raise
    finally:
        browser_hub.release()
        (artifacts / f"models-{ui}-console-errors.txt").write_text("\n".join(nb.details))
        context.close()


def check_pull(nb: NotebookPage, hub: LocalHub, ui: str, artifacts: Path) -> None:
    """The pulled model's row shows its bar at 50% while the hub holds it, then "on disk"."""
    hub.pause_at(size(hub, ui) // 2)
    cell = nb.run(1, wait=False)
    row = cell.locator(f".sf-models .sf-model[data-id='{ui}']")
    expect(row).to_have_attribute("data-state", "downloading", timeout=60_000)
    bar = row.locator(".sf-bar[role=progressbar]")
    expect(bar).to_be_visible()
    expect(bar).to_have_attribute("aria-valuenow", "50", timeout=60_000)
    expect(row.locator(".sf-model-detail")).to_contain_text("50% ·")
    expect(row.locator("button.sf-model-unload")).to_have_text("Stop")
    cell.screenshot(path=artifacts / f"models-{ui}-downloading.png")
    hub.release()
    expect(row).to_have_attribute("data-state", "available", timeout=60_000)
    expect(row.locator(".sf-model-state")).to_have_text("on disk")
    expect(bar).to_be_hidden()
    assert nb.cell(1).locator(".sf-model").count() == 1  # a pull shows its own model only
    nb.wait_kernel_idle()


def check_models(nb: NotebookPage, ui: str, artifacts: Path) -> None:
    """Load, Use (the magic's default) and Remove (twice) on the models list."""
    view = nb.run(2).locator(".sf-models")
    expect(view.locator(".sf-models-live")).to_have_text("● live", timeout=30_000)
    expect(view.locator(f".sf-model[data-id='{CHATML}']")).to_be_visible()
    row = view.locator(f".sf-model[data-id='{ui}']")
    expect(row).to_have_attribute("data-state", "available")
    row.locator("button.sf-model-load").click()
    expect(row).to_have_attribute("data-state", "loaded", timeout=60_000)
    expect(row.locator(".sf-model-state")).to_have_text("loaded")
    row.locator("button.sf-model-default").click()
    expect(row.locator(".sf-model-is-default")).to_have_text("default")
    expect(row.locator("button.sf-model-default")).to_have_count(0)
    view.screenshot(path=artifacts / f"models-{ui}-list.png")
    meta = nb.run(3).locator(".sf-response .sf-response-meta")
    expect(meta).to_contain_text(ui)  # the cell named no model: the default answered
    remove = row.locator("button.sf-model-remove")
    remove.click()
    expect(remove).to_have_text("Confirm remove")
    remove.click()
    expect(row).to_have_count(0, timeout=30_000)


def check_waiting_cell(nb: NotebookPage, hub: LocalHub, ui: str, artifacts: Path) -> None:
    """A ``%%respond`` cell on a model still downloading shows its bar, then streams."""
    late = f"{ui}-late"
    hub.pause_at(size(hub, late) // 2)
    nb.run(4)
    view = nb.run(5, wait=False).locator(".sf-response")
    expect(view).to_have_attribute("data-waiting", "downloading", timeout=60_000)
    waiting = view.locator(".sf-waiting")
    expect(waiting).to_contain_text(f"{late}: downloading")
    expect(waiting.locator(".sf-bar[role=progressbar]")).to_have_attribute(
        "aria-valuenow", "50", timeout=60_000
    )
    view.screenshot(path=artifacts / f"models-{ui}-waiting.png")
    hub.release()
    expect(view).to_have_attribute("data-status", DONE, timeout=120_000)
    expect(waiting).to_be_hidden()
    expect(view.locator(".sf-response-meta")).to_contain_text(late)
    nb.wait_kernel_idle()
