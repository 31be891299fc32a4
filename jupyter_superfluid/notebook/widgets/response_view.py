"""``ResponseView``: a response as it streams, as an ipywidgets 8 DOM widget.

It implements the ``%%respond`` renderer interface (``start`` / ``on_event`` /
``finish``, see ``notebook/render.py``), so the magic streams into it when the
front-end is present. Updates are batched: events fold into a ``ResponseState`` and
the synced traits change at most once per ``interval`` (50 ms), not once per token.

The Stop button sends ``{"type": "stop"}``. When the view streams on a worker thread
(a branch started from the tree), the kernel is free: the next event raises
``StopRequested``, which closes the HTTP stream, and the server cancels the
generation. When a cell streams in the foreground the kernel cannot read messages
until the cell ends, so the view says ``stop_mode="interrupt"`` and the front-end also
interrupts the kernel (the magic's KeyboardInterrupt path closes the stream).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Mapping
from typing import Any

import ipywidgets as widgets
from traitlets import Dict, Enum, List, Unicode

from jupyter_superfluid.notebook.widgets._frontend import MODULE_NAME, MODULE_VERSION
from jupyter_superfluid.notebook.widgets.state import ResponseState

STATUSES = ("idle", "in_progress", "completed", "incomplete", "failed", "cancelled")


class StopRequested(KeyboardInterrupt):
    """Raised in the streaming loop after the view's Stop button was pressed."""


class ResponseView(widgets.DOMWidget):
    """A streaming response: reasoning, Markdown text, function calls, status, usage."""

    _model_name = Unicode("ResponseViewModel").tag(sync=True)
    _model_module = Unicode(MODULE_NAME).tag(sync=True)
    _model_module_version = Unicode(MODULE_VERSION).tag(sync=True)
    _view_name = Unicode("ResponseViewView").tag(sync=True)
    _view_module = Unicode(MODULE_NAME).tag(sync=True)
    _view_module_version = Unicode(MODULE_VERSION).tag(sync=True)

    response_id = Unicode("", help="The response's id (resp_…), once created.").tag(sync=True)
    model = Unicode("", help="The model that answers.").tag(sync=True)
    status = Enum(STATUSES, "idle", help="Where the response is.").tag(sync=True)
    items = List(Dict(), help="Output items: reasoning, message, function_call.").tag(sync=True)
    usage: Any = Dict(allow_none=True, default_value=None, help="Token counts and speed.").tag(
        sync=True
    )
    error = Unicode("", help="Why the response stopped early, if it did.").tag(sync=True)
    stop_mode = Enum(("message", "interrupt", "none"), "none", help="How Stop stops.").tag(
        sync=True
    )
    waiting: Any = Dict(
        allow_none=True,
        default_value=None,
        help="The model's state (with its progress) while it downloads or loads.",
    ).tag(sync=True)

    def __init__(self, *, autodisplay: bool = False, interval: float = 0.05, **kwargs: Any):
        super().__init__(**kwargs)
        self.autodisplay = autodisplay  # display itself on start (the magic's renderer)
        self.shows_value = autodisplay  # the magic need not display the reply again
        self.interval = interval
        self.syncs = 0  # how many batched updates were pushed to the front-end
        self.stop_requested = False
        self._state = ResponseState()
        self._lock = threading.RLock()
        self._last_sync = 0.0
        self._dirty = False
        self._stop_mode = "none"
        self.on_msg(self._on_message)

    # --- the renderer interface -----------------------------------------------------

    def start(self, meta: Any = None) -> None:
        """A response is about to stream: reset, show the model, and display if asked."""
        with self._lock:
            self._state = ResponseState()
            self._state.model = str(getattr(meta, "model", None) or "")
            self._state.status = "in_progress"
            self.stop_requested = False
            foreground = threading.current_thread() is threading.main_thread()
            self._stop_mode = "interrupt" if foreground and _in_kernel() else "message"
            self._push()
        if self.autodisplay:
            from IPython.display import display

            display(self)

    def on_event(self, event: Mapping[str, Any]) -> None:
        """Fold in one stream event; sync when ``interval`` has passed since the last."""
        if self.stop_requested:
            raise StopRequested("stopped from the response view")
        with self._lock:
            self._dirty = self._state.apply(event) or self._dirty
            if self._dirty and time.monotonic() - self._last_sync >= self.interval:
                self._push()

    def finish(self, reply: Any = None, error: str | None = None) -> None:
        """The response is done (``reply``), or stopped or failed (``error``)."""
        with self._lock:
            state = self._state
            if reply is None:
                stopped = self.stop_requested or "interrupt" in (error or "")
                if stopped or "cancel" in (error or ""):
                    state.cancel(error or "stopped: the generation was cancelled")
                else:
                    state.fail(error or "failed")
            self._stop_mode = "none"
            self._push()

    # --- syncing --------------------------------------------------------------------

    def _push(self) -> None:
        """Copy the state into the synced traits, in one comm message."""
        state = self._state
        with self.hold_sync():
            self.response_id = state.response_id
            self.model = state.model
            self.status = state.status
            self.items = copy.deepcopy(state.items)
            self.usage = copy.deepcopy(state.usage)
            self.error = state.error
            self.stop_mode = self._stop_mode
            self.waiting = copy.deepcopy(state.waiting)
        self.syncs += 1
        self._dirty = False
        self._last_sync = time.monotonic()

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """Custom messages from the front-end: ``{"type": "stop"}``."""
        stop = isinstance(content, dict) and content.get("type") == "stop"
        if stop and self.status == "in_progress":
            self.stop_requested = True

    @property
    def text(self) -> str:
        """The message text shown so far."""
        return "".join(i["text"] for i in self.items if i["type"] == "message")


def _in_kernel() -> bool:
    """Whether this runs in an IPython kernel (not a terminal or a plain script)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return getattr(get_ipython(), "kernel", None) is not None
