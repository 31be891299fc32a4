"""``ConversationTree``: the stored responses of a conversation as a branch tree widget.

The kernel side does all HTTP (through ``notebook.client``'s server discovery); the
front-end renders the synced state and sends intents (select, branch, delete,
refresh). Python drives it too: ``tree.select(id)``, ``tree.branch(id, "text")``,
``tree.continue_from("text")``, ``tree.delete(id)`` and ``tree.refresh()`` (which
picks up responses created elsewhere, by ``%%respond`` or the ``openai`` client).

A branch started from the front-end streams on a worker thread, so the kernel stays
free to take the Stop message; one started from Python streams in the foreground.
Either way the new child streams into ``live`` (a ``ResponseView``), then becomes the
current node, and ``on_current`` (the magic's hook) hears of it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
from traitlets import Bool, Dict, Instance, List, Unicode

from jupyter_superfluid.notebook.client import endpoint
from jupyter_superfluid.notebook.readable import readable
from jupyter_superfluid.notebook.render import RenderMeta
from jupyter_superfluid.notebook.result import Reply
from jupyter_superfluid.notebook.transport import Cancelled, run_openai
from jupyter_superfluid.notebook.widgets._frontend import MODULE_NAME, MODULE_VERSION
from jupyter_superfluid.notebook.widgets.api import Api, conversation, node_detail
from jupyter_superfluid.notebook.widgets.response_view import ResponseView

CurrentHook = Callable[[str | None, Reply | None], None]


class ConversationTree(widgets.DOMWidget):
    """The branch tree of one conversation (or of every stored response)."""

    _model_name = Unicode("ConversationTreeModel").tag(sync=True)
    _model_module = Unicode(MODULE_NAME).tag(sync=True)
    _model_module_version = Unicode(MODULE_VERSION).tag(sync=True)
    _view_name = Unicode("ConversationTreeView").tag(sync=True)
    _view_module = Unicode(MODULE_NAME).tag(sync=True)
    _view_module_version = Unicode(MODULE_VERSION).tag(sync=True)

    nodes = List(Dict(), help="The conversation's stored responses (listing records).").tag(
        sync=True
    )
    current = Unicode("", help="The response the notebook's conversation is at.").tag(sync=True)
    selected = Unicode("", help="The node whose input and output are shown.").tag(sync=True)
    detail: Any = Dict(
        allow_none=True, default_value=None, help="The selected node's content."
    ).tag(sync=True)
    busy = Bool(False, help="A branch is streaming.").tag(sync=True)
    error = Unicode("", help="The last action's error, in words.").tag(sync=True)
    live = Instance(ResponseView, allow_none=True, help="The branch streaming now.").tag(
        sync=True, **widgets.widget_serialization
    )

    def __init__(
        self,
        response_id: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        on_current: CurrentHook | None = None,
        branch_options: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(current=response_id or "", **kwargs)
        self.anchor = response_id  # the tree shown is the one holding this response
        self.on_current = on_current
        self.branch_options = dict(branch_options or {})  # Responses params for branches
        self._endpoint = endpoint(base_url, api_key)
        self._api = Api(self._endpoint)
        self._client: Any = None
        self._members: set[str] = set()
        self._lock = threading.RLock()
        self.on_msg(self._on_message)
        self.refresh()

    # --- Python API -----------------------------------------------------------------

    def refresh(self) -> list[dict[str, Any]]:
        """Fetch the listing again and redraw; returns the nodes shown."""
        with self._lock:
            records = self._api.listing()
            nodes = conversation(records, self.anchor)
            if self.anchor and not nodes:  # the anchor went: hold on to what is left
                present = {r["id"] for r in records} & self._members
                self.anchor = min(present) if present else None
                nodes = conversation(records, self.anchor) if self.anchor else []
            self._members = {n["id"] for n in nodes}
            self.nodes = nodes
            if self.selected and self.selected not in self._members:
                self.selected, self.detail = "", None
            return nodes

    def select(self, response_id: str) -> dict[str, Any]:
        """Show a node's input and output; returns that detail."""
        with self._lock:
            response = self._api.retrieve(response_id)
            detail = node_detail(response, self._api.input_items(response_id))
            with self.hold_sync():
                self.selected, self.detail = response_id, detail
            return detail

    def branch(self, response_id: str, text: str, **options: Any) -> Reply | None:
        """Continue ``response_id`` with ``text``; the child streams in and is selected.

        ``options`` are Responses parameters (``max_output_tokens``, ``seed``,
        ``extra_body``…) over ``branch_options``. Returns the new reply, or None when
        it was stopped.
        """
        return self._branch(response_id, text, options)

    def continue_from(self, text: str, **options: Any) -> Reply | None:
        """Continue the current node (else the newest leaf) with ``text``."""
        leaves = {n["id"] for n in self.nodes} - {n["previous_response_id"] for n in self.nodes}
        newest = max((n for n in self.nodes if n["id"] in leaves), key=_age, default=None)
        target = self.current or (newest or {}).get("id")
        if not target:
            raise ValueError("the tree has no response to continue")
        return self._branch(target, text, options)

    def delete(self, response_id: str) -> None:
        """Delete a stored response on the server and redraw."""
        with self._lock:
            parent = next(
                (n["previous_response_id"] for n in self.nodes if n["id"] == response_id), None
            )
            self._api.delete(response_id)
            if self.anchor == response_id:
                self.anchor = parent or next(iter(self._members - {response_id}), None)
            self.refresh()
            if self.current == response_id:
                self.current = parent if parent in self._members else ""
                self._notify(self.current or None, None)

    # --- branching ------------------------------------------------------------------

    def _branch(self, parent: str, text: str, options: dict[str, Any]) -> Reply | None:
        """Stream a child of ``parent`` into a fresh ``live`` view."""
        view = ResponseView()
        with self._lock:
            if self.busy:
                raise RuntimeError("a branch is already streaming: wait, or stop it")
            self.busy, self.error, self.live = True, "", view
        params = _sdk_ready({**self.branch_options, **options})
        params.update(previous_response_id=parent, input=text)
        view.start(RenderMeta(model=None, previous_response_id=parent, input=text))
        try:
            final = run_openai(self.client(), params, stream=True, on_event=view.on_event)
            reply = Reply(final)
            view.finish(reply)
            self._adopt(reply)  # before busy clears: the new node is there when it does
            return reply
        except Cancelled:
            view.finish(None, "stopped: the generation was cancelled")
            return None
        except Exception as exc:
            view.finish(None, _readable(exc))
            self.error = _readable(exc)
            raise
        finally:
            self.busy = False

    def _adopt(self, reply: Reply) -> None:
        """Make a new reply the current node: redraw, select it, tell the hook."""
        with self._lock:
            self.anchor = self.anchor or reply.id
            self.current = reply.id
            self.refresh()
            self.select(reply.id)
        self._notify(reply.id, reply)

    def client(self) -> Any:
        """The ``openai.OpenAI`` client branches stream through."""
        if self._client is None:
            import openai

            ep = self._endpoint
            self._client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)
        return self._client

    def _notify(self, response_id: str | None, reply: Reply | None) -> None:
        if self.on_current is not None:
            self.on_current(response_id, reply)

    # --- front-end intents ----------------------------------------------------------

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """Intents from the front-end: select, branch, delete, refresh."""
        if not isinstance(content, dict):
            return
        kind, rid = content.get("type"), str(content.get("id") or "")
        if kind == "branch":
            self._branch_in_background(rid, str(content.get("text") or ""))
        elif kind == "select" and rid:
            self._guard(self.select, rid)
        elif kind == "delete" and rid:
            self._guard(self.delete, rid)
        elif kind == "refresh":
            self._guard(self.refresh)

    def _guard(self, action: Callable[..., Any], *args: Any) -> None:
        """Run an intent; show its failure as ``error`` instead of raising in the kernel."""
        try:
            action(*args)
            self.error = ""
        except Exception as exc:
            self.error = _readable(exc)

    def _branch_in_background(self, parent: str, text: str) -> None:
        """A branch asked for by the front-end streams on a worker thread."""
        if not (parent and text.strip()):
            self.error = "write a message to branch with"
            return
        if self.busy:
            self.error = "a branch is already streaming: wait, or stop it"
            return
        worker = threading.Thread(
            target=self._guard, args=(self._branch, parent, text, {}), daemon=True
        )
        worker.start()


def _age(node: dict[str, Any]) -> tuple[int, str]:
    return (int(node.get("created_at") or 0), str(node.get("id")))


def _sdk_ready(options: dict[str, Any]) -> dict[str, Any]:
    """Options with ``seed`` inside ``extra_body`` when both are given (the SDK's way)."""
    out = dict(options)
    if "seed" in out and "extra_body" in out:
        out["extra_body"] = {**out["extra_body"], "seed": out.pop("seed")}
    return out


def _readable(exc: BaseException) -> str:
    """One line for an error, as the magic words it."""
    return readable(exc) or f"{type(exc).__name__}: {exc}"
