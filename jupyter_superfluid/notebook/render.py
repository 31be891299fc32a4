"""How a ``%%respond`` cell shows a response while it streams: one small renderer interface.

A renderer gets, for one cell:

- ``start(meta)`` once, before the first request;
- ``on_event(event)`` for every streamed event of every round, as a dict shaped like an
  OpenAI Responses stream event (``type`` plus its fields: ``response.created``,
  ``response.reasoning_text.delta``, ``response.output_text.delta``,
  ``response.output_item.done``, ``response.completed``…; LMSP streams are translated
  into the same names). Without streaming it gets one ``response.completed`` per round.
  Between rounds of a tool loop it gets ``superfluid.tool_output`` events
  (``call_id``, ``name``, ``arguments``, ``output``); while the cell's model downloads
  or loads, ``superfluid.model_waiting`` events (``model``: its state, with progress);
- ``finish(reply, error)`` once: the final ``Reply``, or ``None`` and a short message
  when the cell was interrupted or failed.

``choose_renderer(shell)`` picks the first registered factory that returns a renderer
(the widgets register one for when their front-end is present), else rich live cell
output in a kernel, else plain text on stdout.
"""

from __future__ import annotations

import html
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from jupyter_superfluid.notebook.model_progress import TextProgress, progress_line
from jupyter_superfluid.notebook.result import Reply

UPDATE_INTERVAL = 0.08  # seconds between live display updates: smooth, not chatty
WAITING_EVENT = "superfluid.model_waiting"


@dataclass
class RenderMeta:
    """What a cell asks for, as a renderer may want to show it."""

    model: str | None
    previous_response_id: str | None
    input: str
    stream: bool = True
    protocol: str = "openai"  # or "lmsp"
    options: dict[str, Any] = field(default_factory=dict)


class StreamRenderer(Protocol):
    """Shows one ``%%respond`` cell's response as it arrives."""

    def start(self, meta: RenderMeta) -> None:
        """The cell is about to send its first request."""

    def on_event(self, event: Mapping[str, Any]) -> None:
        """One stream event (an OpenAI Responses event dict) or a tool output."""

    def finish(self, reply: Reply | None, error: str | None = None) -> None:
        """The cell is done: its final reply, or None and why not."""


RendererFactory = Callable[[Any], "StreamRenderer | None"]
_factories: list[RendererFactory] = []


def register_renderer(factory: RendererFactory) -> None:
    """Try ``factory(shell)`` before the built-in renderers (latest registered first)."""
    if factory not in _factories:
        _factories.insert(0, factory)


def unregister_renderer(factory: RendererFactory) -> None:
    """Stop offering ``factory``."""
    if factory in _factories:
        _factories.remove(factory)


def choose_renderer(shell: Any) -> StreamRenderer:
    """The renderer for a cell: a registered one that accepts, else a built-in."""
    for factory in list(_factories):
        renderer = factory(shell)
        if renderer is not None:
            return renderer
    if getattr(shell, "kernel", None) is not None:
        return DisplayRenderer()
    return TextRenderer()


def pieces(event: Mapping[str, Any]) -> list[tuple[str, str]]:
    """What an event adds to the view: (kind, text) with kind thinking, text or tool."""
    kind = event.get("type", "")
    if kind == "response.reasoning_text.delta":
        return [("thinking", str(event.get("delta", "")))]
    if kind == "response.output_text.delta":
        return [("text", str(event.get("delta", "")))]
    item = event.get("item") or {}
    if kind == "response.output_item.done" and item.get("type") == "function_call":
        return [("tool", f"→ {item.get('name')}({item.get('arguments', '')})")]
    if kind == "superfluid.tool_output":
        return [("tool", f"← {event.get('name')}: {event.get('output', '')}")]
    if kind == "response.completed" and event.get("streamed") is False:
        reply = Reply(dict(event.get("response") or {}))  # a round that did not stream
        out = [("thinking", reply.reasoning_text), ("text", reply.output_text)]
        out += [
            ("tool", f"→ {c.get('name')}({c.get('arguments', '')})") for c in reply.function_calls
        ]
        return [(k, t) for k, t in out if t]
    return []


class _Transcript:
    """What has streamed so far, in order: thinking, text and tool blocks."""

    def __init__(self) -> None:
        self.blocks: list[list[str]] = []  # [kind, text]

    def feed(self, event: Mapping[str, Any]) -> bool:
        """Take an event; True when it changed what is shown."""
        added = pieces(event)
        for kind, text in added:
            if self.blocks and self.blocks[-1][0] == kind and kind != "tool":
                self.blocks[-1][1] += text
            else:
                self.blocks.append([kind, text])
        return bool(added)


class TextRenderer:
    """Plain text on stdout (a terminal IPython, or tests): deltas as they come."""

    def __init__(self, out: Any = None) -> None:
        self.out = out
        self.kind = ""  # the kind of the last piece written
        self.waiting = TextProgress(out)

    def start(self, meta: RenderMeta) -> None:
        """Nothing to show before the first token."""

    def on_event(self, event: Mapping[str, Any]) -> None:
        """Write deltas and tool calls as they arrive; a model's progress while it is not ready."""
        if event.get("type") == WAITING_EVENT:
            self.waiting.update(event.get("model") or {})
            return
        out = self.out or sys.stdout
        for kind, text in pieces(event):
            if kind != self.kind or kind == "tool":
                if self.kind == "thinking":
                    out.write(" [/thinking]")
                if self.kind:
                    out.write("\n")
                if kind == "thinking":
                    out.write("[thinking] ")
            out.write(text)
            self.kind = kind
        out.flush()

    def finish(self, reply: Reply | None, error: str | None = None) -> None:
        """End the line; say why if the cell stopped early."""
        out = self.out or sys.stdout
        if self.kind:
            out.write("\n")
            if error:  # after partial output; an error before any is raised on its own
                out.write(f"[{error}]\n")
        out.flush()


class DisplayRenderer:
    """Live rich output in a kernel: one display, updated as text streams."""

    def __init__(self) -> None:
        self.transcript = _Transcript()
        self.handle: Any = None
        self.last = 0.0

    def start(self, meta: RenderMeta) -> None:
        """Open the live display with a placeholder."""
        from IPython.display import display

        label = f"{meta.model or 'default model'}…"
        self.handle = display({"text/plain": label}, raw=True, display_id=True)

    def on_event(self, event: Mapping[str, Any]) -> None:
        """Update the display, at most every ``UPDATE_INTERVAL`` seconds."""
        if event.get("type") == WAITING_EVENT:  # the model is not ready: say where it is
            self._show(progress_line(event.get("model") or {}))
            return
        if self.transcript.feed(event) and time.monotonic() - self.last >= UPDATE_INTERVAL:
            self._show()

    def _show(self, note: str = "") -> None:
        self.last = time.monotonic()
        if self.handle is not None:
            self.handle.update(self.bundle(note), raw=True)

    def bundle(self, note: str = "") -> dict[str, str]:
        """The transcript as text/plain and text/html."""
        plain, rich = [], []
        for kind, text in self.transcript.blocks:
            safe = html.escape(text)
            if kind == "thinking":
                plain.append(f"[thinking] {text}")
                rich.append(
                    '<details style="opacity:0.6"><summary>thinking…</summary>'
                    f'<div style="white-space:pre-wrap">{safe}</div></details>'
                )
            elif kind == "tool":
                plain.append(text)
                rich.append(f"<div><code>{safe}</code></div>")
            else:
                plain.append(text)
                rich.append(f'<div style="white-space:pre-wrap">{safe}</div>')
        if note:
            plain.append(f"[{note}]")
            rich.append(f"<div><em>{html.escape(note)}</em></div>")
        return {"text/plain": "\n".join(plain), "text/html": "".join(rich)}

    def finish(self, reply: Reply | None, error: str | None = None) -> None:
        """On success the cell's value shows the reply, so the live view goes; else keep it."""
        if self.handle is None:
            return
        if (reply is not None and not error) or not self.transcript.blocks:
            self.handle.update({"text/plain": ""}, raw=True)
        else:
            self._show(error or "")  # keep what streamed, and say why it stopped
