"""Zero configuration in a real kernel that a real Jupyter server started (token, base URL).

The kernel is created through the server's REST API, so it is the server's own child
with its connection file in the server's runtime dir: exactly what discovery meets in
JupyterLab. nbclient then runs a notebook in it.
"""

from __future__ import annotations

import json
from typing import Any

import nbformat
import pytest
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from jupyter_superfluid.notebook import client as discovery

CELLS = [
    "import jupyter_superfluid\n"
    "c = jupyter_superfluid.client()\n"
    "print(c.base_url)\n"
    "print(sorted(m.id for m in c.models.list()))",
    "ac = jupyter_superfluid.async_client()\nprint(len((await ac.models.list()).data))",
    "%load_ext jupyter_superfluid",
    "%%respond -m superfluid/tiny-chatml --max-tokens 6 --seed 1\nHello {c.__class__.__name__}",
    "first = _\nprint(first.id)",
    "%%respond --max-tokens 4\nAgain",
    "print(_.id, _.previous_response_id)",
]


class _Attached(AsyncKernelManager):
    """A manager for a kernel someone else (the Jupyter server) started and owns."""

    @property
    def has_kernel(self) -> bool:
        return True


def _stdout(cell: Any) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


@pytest.fixture
def no_overrides(monkeypatch):
    """The kernel inherits this environment: no override may leak into it."""
    for name in (discovery.ENV_BASE_URL, discovery.ENV_API_KEY, discovery.ENV_MODEL):
        monkeypatch.delenv(name, raising=False)


async def test_zero_config_in_a_server_started_kernel(
    no_overrides, jp_serverapp, jp_fetch, jp_base_url, jp_http_port
):
    assert jp_base_url == "/a%40b/" and jp_serverapp.identity_provider.token  # token auth on
    r = await jp_fetch("api", "kernels", method="POST", body=json.dumps({"name": "python3"}))
    kernel_id = json.loads(r.body)["id"]
    connection_file = jp_serverapp.kernel_manager.get_kernel(kernel_id).connection_file
    kc = AsyncKernelClient(connection_file=connection_file)
    kc.load_connection_file()
    kc.start_channels()
    try:
        await kc.wait_for_ready(timeout=60)
        nb = new_notebook(cells=[new_code_cell(src) for src in CELLS])
        runner = NotebookClient(nb, km=_Attached(), timeout=60, kernel_name="python3")
        runner.kc = kc
        await runner.async_execute()
    finally:
        kc.stop_channels()
    nbformat.validate(nb)
    cells = nb.cells
    base_url, models = _stdout(cells[0]).splitlines()
    assert base_url == f"http://localhost:{jp_http_port}/a%40b/v1/"
    assert models == "['superfluid/tiny-chatml', 'superfluid/tiny-qwen3']"
    assert _stdout(cells[1]).strip() == "2"
    live, result = cells[3].outputs  # the live view (cleared once done) and the value
    assert live.output_type == "display_data" and live.data == {"text/plain": ""}
    assert result.output_type == "execute_result"
    first_id = _stdout(cells[4]).strip()
    assert first_id.startswith("resp_") and first_id in result["data"]["text/markdown"]
    assert "superfluid/tiny-chatml" in result["data"]["text/plain"]
    second_id, previous_id = _stdout(cells[6]).split()
    assert previous_id == first_id and second_id != first_id
    stored = json.loads((await jp_fetch("v1", "responses", second_id)).body)
    assert stored["previous_response_id"] == first_id
    items = json.loads((await jp_fetch("v1", "responses", first_id, "input_items")).body)
    assert items["data"][0]["content"][0]["text"] == "Hello OpenAI"
