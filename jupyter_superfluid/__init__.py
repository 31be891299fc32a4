"""jupyter_superfluid: a local language-model service inside Jupyter.

Entry points only; everything heavy is imported lazily so that importing the
package (e.g. in a kernel for ``%load_ext``) stays cheap.
"""

from __future__ import annotations

from typing import Any

from jupyter_superfluid._version import __version__

__all__ = ["__version__", "async_client", "client", "load_ipython_extension", "pull"]


def _jupyter_server_extension_points() -> list[dict[str, Any]]:
    from jupyter_superfluid.app import SuperfluidApp

    return [{"module": "jupyter_superfluid.app", "app": SuperfluidApp}]


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    return [{"src": "labextension", "dest": "jupyter-superfluid"}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext jupyter_superfluid``: register the ``%%respond`` magic."""
    from jupyter_superfluid.notebook.magics import register

    register(ipython)


def client(**kwargs: Any) -> Any:
    """An ``openai.OpenAI`` client configured for this Jupyter server (zero-config)."""
    from jupyter_superfluid.notebook.client import client as _client

    return _client(**kwargs)


def async_client(**kwargs: Any) -> Any:
    """An ``openai.AsyncOpenAI`` client configured for this Jupyter server."""
    from jupyter_superfluid.notebook.client import async_client as _async_client

    return _async_client(**kwargs)


def pull(spec: str, *, load: bool = False, wait: bool = True) -> dict[str, Any]:
    """Serve ``spec`` (``hf:REPO/FILE.gguf``, a path on the server…), showing its download.

    Returns the model's state once its files are here (loaded too, with ``load=True``);
    raises ``PullFailed`` with the reason when the download fails.
    """
    from jupyter_superfluid.notebook.pull import pull as _pull

    return _pull(spec, load=load, wait=wait)
