"""``%respond tree`` and the widgets the magic streams into.

``show_tree`` displays the ``ConversationTree`` of the notebook's conversation; a branch
made in it becomes the conversation the next cell continues, with the ``%respond``
defaults as its parameters. ``use_widgets`` makes ``%%respond`` stream into a
``ResponseView`` when ipywidgets is installed.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from jupyter_superfluid.notebook.readable import readable
from jupyter_superfluid.notebook.respond import NotebookSession
from jupyter_superfluid.notebook.result import Reply


def use_widgets() -> None:
    """Stream into a ``ResponseView`` when the front-end can show it (else plain output)."""
    try:
        from jupyter_superfluid.notebook.widgets import widget_renderer
    except ImportError:  # ipywidgets missing: the built-in renderers remain
        return
    from jupyter_superfluid.notebook.render import register_renderer

    register_renderer(widget_renderer)


def show_tree(session: NotebookSession) -> Any:
    """``%respond tree``: display the ConversationTree of the notebook's conversation."""
    from IPython.display import display

    from jupyter_superfluid.notebook.widgets import ConversationTree

    def follow(response_id: str | None, reply: Reply | None) -> None:
        # A branch made in the tree becomes the conversation the next cell continues.
        session.head = response_id
        if reply is not None:
            session.last = reply

    try:
        options = session.defaults.response_params()
        tree = ConversationTree(session.head, on_current=follow, branch_options=options)
    except Exception as exc:
        message = readable(exc)
        if message is None:
            raise
        raise UsageError(message) from None
    display(tree)
    return tree
