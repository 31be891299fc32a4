"""Models from a notebook: ``pull``, ``show_models``, and waiting for a model to be ready.

``pull(spec)`` asks the server to serve one more model (``hf:REPO/FILE.gguf``, a path on
the server, …), shows its download in the cell and returns once it is on disk (or loaded,
with ``load=True``). In JupyterLab and Notebook 7 the progress is a ``ModelsView`` row
with a live bar; elsewhere a text line every few seconds. Interrupting the cell stops the
waiting, not the download: the server goes on, and ``pull`` again shows where it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jupyter_superfluid.notebook.model_progress import TextProgress, progress_line
from jupyter_superfluid.notebook.models import ModelsClient, State, settled, wait_for


class PullFailed(RuntimeError):
    """The model's download (or load) ended ``failed``; the message says why."""


def _widgets(shell: Any) -> bool:
    try:
        from jupyter_superfluid.notebook.widgets import frontend_available
    except ImportError:
        return False
    return frontend_available(shell)


def _finished(load: bool) -> Callable[[State], bool]:
    if load:
        return lambda s: s.get("state") in ("loaded", "failed")
    return settled


def pull(
    spec: str,
    *,
    load: bool = False,
    wait: bool = True,
    shell: Any = None,
    on_default: Callable[[str], None] | None = None,
) -> State:
    """Serve ``spec`` on the server, showing its download; its state once settled.

    Raises PullFailed when the download (or the load) fails, ModelsError when the
    server refuses the spec.
    """
    client = ModelsClient()
    state = client.add(spec, load=load)
    return watch(
        client, str(state["id"]), _finished(load), wait=wait, shell=shell, on_default=on_default
    )


def load(
    model_id: str, *, shell: Any = None, on_default: Callable[[str], None] | None = None
) -> State:
    """Load a served model, showing its download and load; its state once loaded."""
    client = ModelsClient()
    client.load(model_id)
    return watch(client, model_id, _finished(True), shell=shell, on_default=on_default)


def watch(
    client: ModelsClient,
    model_id: str,
    done: Callable[[State], bool],
    *,
    wait: bool = True,
    shell: Any = None,
    on_default: Callable[[str], None] | None = None,
) -> State:
    """Show one model's progress in the cell (a live row, or text) until ``done``; its state."""
    if _widgets(shell):
        from IPython.display import display

        from jupyter_superfluid.notebook.widgets import ModelsView

        view = ModelsView(only=[model_id], client=client, on_default=on_default)
        display(view)
        state = view.wait_for(model_id, done) if wait else (view.row(model_id) or {})
    elif wait:
        state = wait_for(client, model_id, done, TextProgress().update)
    else:
        state = client.get(model_id)
    if state.get("state") == "failed":
        raise PullFailed(f"{model_id}: {state.get('error')}")
    return state


def show_models(
    shell: Any = None,
    *,
    default_model: str = "",
    on_default: Callable[[str], None] | None = None,
) -> Any:
    """Display the served models: a live ``ModelsView``, or a text listing; the view or None."""
    if _widgets(shell):
        from IPython.display import display

        from jupyter_superfluid.notebook.widgets import ModelsView

        view = ModelsView(default_model=default_model, on_default=on_default)
        display(view)
        return view
    for state in ModelsClient().list():
        mark = "*" if state.get("id") == default_model else " "
        print(f"{mark} {progress_line(state)}")
    return None
