"""ipywidgets 8 widgets of the notebook side: ResponseView, ConversationTree, ModelsView.

Their front-end is the ``jupyter-superfluid`` JupyterLab / Notebook 7 extension
(``labextension/``), installed with the package. ``widget_renderer`` is the
``%%respond`` renderer factory: a ``ResponseView`` when the front-end is present,
else None (the magic then falls back to plain output).
"""

from __future__ import annotations

from typing import Any

from jupyter_superfluid.notebook.widgets._frontend import (
    ENV_WIDGETS,
    MODULE_NAME,
    MODULE_VERSION,
    frontend_available,
)
from jupyter_superfluid.notebook.widgets.models_view import ModelsView
from jupyter_superfluid.notebook.widgets.response_view import ResponseView, StopRequested
from jupyter_superfluid.notebook.widgets.tree import ConversationTree

__all__ = [
    "ENV_WIDGETS",
    "MODULE_NAME",
    "MODULE_VERSION",
    "ConversationTree",
    "ModelsView",
    "ResponseView",
    "StopRequested",
    "frontend_available",
    "widget_renderer",
]


def widget_renderer(shell: Any) -> ResponseView | None:
    """A self-displaying ``ResponseView`` for a ``%%respond`` cell, when widgets can show."""
    if not frontend_available(shell):
        return None
    return ResponseView(autodisplay=True)
