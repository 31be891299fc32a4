"""The model commands of the ``%respond`` line magic.

- ``%respond models``: the served models, live (a ``ModelsView`` in JupyterLab and
  Notebook 7: state, progress bars, Load / Unload / Use / Remove), else a text list
  with ``*`` at the magic's default;
- ``%respond pull SPEC [--load]``: serve one more model and show its download;
- ``%respond load ID``, ``%respond unload ID``: load it (with progress), free it;
- ``%respond rm ID [--delete-files]``: stop serving it (and delete its download).

"Use" in the view, like ``%respond -m ID``, makes a model the default of later cells.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from jupyter_superfluid.notebook.client import ENV_MODEL
from jupyter_superfluid.notebook.model_progress import progress_line
from jupyter_superfluid.notebook.models import ModelsClient, ModelsError
from jupyter_superfluid.notebook.pull import PullFailed, load, pull, show_models
from jupyter_superfluid.notebook.respond import NotebookSession, Settings

COMMANDS = ("models", "pull", "load", "unload", "rm")


def default_model(session: NotebookSession) -> str:
    """The model ``%%respond`` uses when a cell names none (as far as the magic decides)."""
    return session.defaults.model or os.environ.get(ENV_MODEL, "").strip()


def use_model(session: NotebookSession) -> Callable[[str], None]:
    """A hook that makes a model the default of later cells."""

    def use(model_id: str) -> None:
        session.defaults = Settings(model=model_id).over(session.defaults)

    return use


def run(command: str, target: str | None, args: Any, session: NotebookSession, shell: Any) -> Any:
    """Run one model command; what it shows (a view), or a readable error (ModelsError)."""
    if command == "models":
        return show_models(
            shell, default_model=default_model(session), on_default=use_model(session)
        )
    if not target:
        what = "a model spec (hf:REPO/FILE.gguf, a path…)" if command == "pull" else "a model id"
        raise ModelsError(f"%respond {command} needs {what}")
    try:
        if command in ("pull", "load"):
            use = use_model(session)
            if command == "pull":  # the progress shows as it goes, the final state too
                pull(target, load=bool(args.load), shell=shell, on_default=use)
            else:
                load(target, shell=shell, on_default=use)
            return None
    except PullFailed as exc:
        raise ModelsError(str(exc)) from None
    client = ModelsClient()
    try:
        if command == "rm":
            client.remove(target, delete_files=bool(args.delete_files))
            print(f"{target}: removed" + (" and its files deleted" if args.delete_files else ""))
        else:
            print(progress_line(client.unload(target)))
    finally:
        client.close()
    return None
