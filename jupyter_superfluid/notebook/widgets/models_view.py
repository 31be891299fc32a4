"""``ModelsView``: the served models, live, with their downloads and loads, as a widget.

Each row is a model's state as the server reports it (``state``, ``progress``,
``error``…); a follower thread reads the models event stream and keeps the rows
current, so a download's progress bar moves without polling. The front-end sends
intents (``load``, ``unload``, ``remove``, ``default``, ``refresh``); each runs on a
worker thread, so the kernel answers at once, and its outcome arrives as events.
``default`` makes a model the ``%%respond`` default (through ``on_default``).

``only`` limits the rows to some models (``%respond pull`` shows just the one it
pulls); ``wait_for`` blocks until a model reaches a state, for ``pull``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets
from traitlets import Bool, Dict, List, Unicode

from jupyter_superfluid.notebook.models import ModelsClient, ModelsError, State
from jupyter_superfluid.notebook.widgets._frontend import MODULE_NAME, MODULE_VERSION

ACTIONS = ("load", "unload", "remove")


class ModelsView(widgets.DOMWidget):
    """The served models with their states, live progress, and load/unload/default/remove."""

    _model_name = Unicode("ModelsViewModel").tag(sync=True)
    _model_module = Unicode(MODULE_NAME).tag(sync=True)
    _model_module_version = Unicode(MODULE_VERSION).tag(sync=True)
    _view_name = Unicode("ModelsViewView").tag(sync=True)
    _view_module = Unicode(MODULE_NAME).tag(sync=True)
    _view_module_version = Unicode(MODULE_VERSION).tag(sync=True)

    models = List(Dict(), help="Each model's state, as the server reports it.").tag(sync=True)
    default_model = Unicode("", help="The model %%respond uses when none is given.").tag(sync=True)
    only = List(Unicode(), help="The models shown (all when empty).").tag(sync=True)
    pending = Dict(help="Model id -> the action sent for it and not answered yet.").tag(sync=True)
    error = Unicode("", help="The last action's error, in words.").tag(sync=True)
    live = Bool(False, help="Whether the view follows the server's model events.").tag(sync=True)

    def __init__(
        self,
        *,
        only: list[str] | None = None,
        default_model: str = "",
        on_default: Callable[[str], None] | None = None,
        client: ModelsClient | None = None,
        follow: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(only=list(only or []), default_model=default_model, **kwargs)
        self.client = client or ModelsClient()
        self.on_default = on_default
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._rows: dict[str, State] = {}
        self.on_msg(self._on_message)
        self._follower: threading.Thread | None = None
        if follow:
            self._follower = threading.Thread(target=self._follow, daemon=True)
            self._follower.start()
        else:
            self.refresh()

    # -- rows ------------------------------------------------------------------------

    def apply(self, name: str, data: dict[str, Any]) -> None:
        """Fold one event of the models stream into the rows."""
        with self._changed:
            if name == "models.snapshot":
                self._rows = {m["id"]: dict(m) for m in data.get("data") or []}
            elif name.startswith("model.") and isinstance(data.get("model"), dict):
                model = dict(data["model"])
                if name == "model.removed":
                    self._rows.pop(model["id"], None)
                else:
                    self._rows[model["id"]] = model
            else:
                return
            self.models = [r for r in self._rows.values() if not self.only or r["id"] in self.only]
            self._changed.notify_all()

    def row(self, model_id: str) -> State | None:
        """One model's latest state, or None when it is not served."""
        with self._changed:
            return self._rows.get(model_id)

    def refresh(self) -> None:
        """Read every model's state again."""
        try:
            self.apply("models.snapshot", {"data": self.client.list()})
        except Exception as exc:
            self.error = str(exc)

    def wait_for(
        self, model_id: str, done: Callable[[State], bool], timeout: float | None = None
    ) -> State:
        """Block until ``model_id``'s row passes ``done``; that row (interruptible)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._changed:
            while True:
                row = self._rows.get(model_id)
                if row is not None and done(row):
                    return row
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"{model_id} did not get there in {timeout} s")
                self._changed.wait(0.25)  # short waits: Ctrl-C / interrupt gets through

    def _follow(self) -> None:
        """Keep the rows current from the event stream until the view is closed."""
        try:
            for name, data in self.client.follow(stop=self._stop):
                if not self.live:
                    self.live = True
                self.apply(name, data)
        except ModelsError as exc:
            self.error = str(exc)
        except Exception as exc:  # the kernel must not die with its widget
            self.error = f"stopped following the server: {type(exc).__name__}: {exc}"
        finally:
            self.live = False

    # -- actions -----------------------------------------------------------------------

    def load(self, model_id: str) -> None:
        """Load a model (downloading it first if needed); its progress follows."""
        self._act("load", model_id, lambda: self.client.load(model_id))

    def unload(self, model_id: str) -> None:
        """Free a model's memory, or stop its download (resumable)."""
        self._act("unload", model_id, lambda: self.client.unload(model_id))

    def remove(self, model_id: str, *, delete_files: bool = False) -> None:
        """Stop serving a model (and delete its downloaded files, if asked)."""
        self._act(
            "remove", model_id, lambda: self.client.remove(model_id, delete_files=delete_files)
        )

    def make_default(self, model_id: str) -> None:
        """Make ``model_id`` the model ``%%respond`` uses when none is given."""
        self.default_model = model_id
        if self.on_default is not None:
            self.on_default(model_id)

    def _act(self, action: str, model_id: str, call: Callable[[], Any]) -> None:
        """Run one action, marking it pending until the server answers."""
        self.pending = {**self.pending, model_id: action}
        self.error = ""
        try:
            call()
        except Exception as exc:
            self.error = f"{action} {model_id}: {exc}"
        finally:
            self.pending = {k: v for k, v in self.pending.items() if k != model_id}

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """Intents from the front-end; the HTTP ones run on a worker thread."""
        if not isinstance(content, dict):
            return
        kind, model_id = content.get("type"), str(content.get("id") or "")
        if kind == "default" and model_id:
            self.make_default(model_id)
        elif kind == "refresh":
            threading.Thread(target=self.refresh, daemon=True).start()
        elif kind in ACTIONS and model_id:
            method = getattr(self, str(kind))
            threading.Thread(target=method, args=(model_id,), daemon=True).start()

    def close(self) -> None:
        """Stop following the server, and close the widget."""
        self._stop.set()
        super().close()
