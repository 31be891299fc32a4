"""Execute a notebook with nbclient in a kernel that a Jupyter server started, and read it.

The kernel belongs to the server (created with ``POST api/kernels``), as in JupyterLab,
so that a notebook's zero-config ``jupyter_superfluid.client()`` finds the server by
itself. nbclient only attaches to it through its connection file.
"""

from __future__ import annotations

import atexit
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbformat import NotebookNode

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


class AttachedKernel(AsyncKernelManager):
    """A manager for a kernel that someone else (the Jupyter server) started and owns."""

    @property
    def has_kernel(self) -> bool:
        """The kernel runs: nbclient must not start one."""
        return True


def read_notebook(name: str) -> NotebookNode:
    """A notebook of ``notebooks/`` by name (without ``.ipynb``)."""
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


async def execute(nb: NotebookNode, connection_file: str | Path, timeout: int = 120) -> None:
    """Run every cell of ``nb`` in the kernel behind ``connection_file``; outputs fill ``nb``.

    Raises nbclient's ``CellExecutionError`` at the first cell that fails.
    """
    kc = AsyncKernelClient(connection_file=str(connection_file))
    kc.load_connection_file()
    kc.start_channels()
    runner = NotebookClient(nb, km=AttachedKernel(), timeout=timeout, kernel_name="python3")
    runner.kc = kc
    try:
        await kc.wait_for_ready(timeout=60)
        await runner.async_execute()
    finally:
        atexit.unregister(runner._cleanup_kernel)
        kc.stop_channels()
    nbformat.validate(nb)


def problems(nb: NotebookNode) -> list[str]:
    """Every error output and every stderr text of the executed notebook."""
    found = []
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.output_type == "error":
                found.append(f"cell {index}: {out.ename}: {out.evalue}")
            elif out.output_type == "stream" and out.name == "stderr":
                found.append(f"cell {index} (stderr): {out.text.strip()}")
    return found


def stdout(nb: NotebookNode) -> str:
    """Everything the notebook's cells printed, in order."""
    return "".join(
        out.text
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if out.output_type == "stream" and out.name == "stdout"
    )


def cell_outputs(nb: NotebookNode, source_start: str) -> list[dict[str, Any]]:
    """The outputs of the first code cell whose source starts with ``source_start``."""
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith(source_start):
            return list(cell.outputs)
    raise AssertionError(f"no cell starts with {source_start!r}")
