"""The value of a ``%%respond`` cell: a response with useful Markdown and pretty reprs.

``Reply`` wraps the final response of a cell (an ``openai`` ``Response``, or the dict an
LMSP server answered) and keeps the earlier rounds of a tool loop with the outputs the
tools gave. Attribute access falls through to the wrapped response, so
``reply.output_text``, ``reply.id`` or ``reply.usage`` work as on the SDK's object.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


@dataclass
class ToolResult:
    """One tool call the model made in a cell, and what the tool returned."""

    call_id: str
    name: str
    arguments: str
    output: str


def as_dict(response: Any) -> dict[str, Any]:
    """A response (SDK model or dict) as a plain JSON-like dict."""
    if isinstance(response, dict):
        return response
    return dict(response.model_dump(mode="json"))


@dataclass(eq=False)
class Reply:
    """The final response of a ``%%respond`` cell, with the rounds of its tool loop."""

    response: Any
    rounds: list[Reply] = field(default_factory=list)  # earlier rounds, oldest first
    tool_results: list[ToolResult] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names the dataclass lacks: behave like the SDK's Response.
        if name.startswith("__") or name == "response":
            raise AttributeError(name)
        response = self.__dict__.get("response")
        if isinstance(response, dict):
            if name in response:
                return response[name]
            raise AttributeError(name)
        return getattr(response, name)

    @cached_property
    def data(self) -> dict[str, Any]:
        """The response as a plain dict."""
        return as_dict(self.response)

    @property
    def id(self) -> str:
        """The response id (``resp_…``)."""
        return str(self.data.get("id", ""))

    @property
    def output_text(self) -> str:
        """The text of every message item, joined."""
        return "".join(_item_text(item) for item in self.data.get("output") or [])

    @property
    def reasoning_text(self) -> str:
        """The reasoning of every reasoning item, joined."""
        return "".join(_reasoning(item) for item in self.data.get("output") or [])

    @property
    def function_calls(self) -> list[dict[str, Any]]:
        """The function_call items of the final response."""
        return [i for i in self.data.get("output") or [] if i.get("type") == "function_call"]

    def usage_line(self) -> str:
        """``model · status · N in (C cached) · M out (R reasoning) · id``."""
        data = self.data
        usage = data.get("usage") or {}
        cached = (usage.get("input_tokens_details") or {}).get("cached_tokens")
        reasoning = (usage.get("output_tokens_details") or {}).get("reasoning_tokens")
        parts = [str(data.get("model", "")), str(data.get("status", ""))]
        if usage:
            tokens_in = f"{usage.get('input_tokens', 0)} in"
            tokens_in += f" ({cached} cached)" if cached is not None else ""
            tokens_out = f"{usage.get('output_tokens', 0)} out"
            tokens_out += f" ({reasoning} reasoning)" if reasoning else ""
            parts += [tokens_in, tokens_out]
        if self.rounds:
            parts.append(f"{len(self.rounds) + 1} rounds")
        parts.append(self.id)
        return " · ".join(p for p in parts if p)

    def _repr_markdown_(self) -> str:
        blocks = []
        reasoning = self.reasoning_text
        if reasoning:
            blocks.append(
                "<details><summary>thinking…</summary>\n\n"
                f"<pre>{html.escape(reasoning)}</pre>\n</details>"
            )
        for result in self.tool_results:
            blocks.append(
                f"🔧 `{result.name}({_short(result.arguments)})` → `{_short(result.output)}`"
            )
        if self.output_text:
            blocks.append(self.output_text)
        for call in self.function_calls:  # calls left unanswered (bound reached)
            blocks.append(f"🔧 `{call.get('name')}({_short(call.get('arguments', ''))})` (not run)")
        blocks.append(f"<sub>{html.escape(self.usage_line())}</sub>")
        return "\n\n".join(blocks)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        if cycle:
            p.text(f"Reply({self.id})")
            return
        lines = []
        if self.reasoning_text:
            lines.append(f"[thinking] {_short(self.reasoning_text, 200)}")
        for result in self.tool_results:
            lines.append(
                f"[tool] {result.name}({_short(result.arguments)}) -> {_short(result.output)}"
            )
        if self.output_text:
            lines.append(self.output_text)
        for call in self.function_calls:
            lines.append(f"[call, not run] {call.get('name')}({_short(call.get('arguments', ''))})")
        lines.append(f"-- {self.usage_line()}")
        p.text("\n".join(lines))

    def __repr__(self) -> str:
        return f"<Reply {self.id} {self.data.get('status')}: {_short(self.output_text, 60)!r}>"


def _item_text(item: dict[str, Any]) -> str:
    """The output text of a message item."""
    if item.get("type") != "message":
        return ""
    return "".join(
        str(part.get("text", ""))
        for part in item.get("content") or []
        if part.get("type") == "output_text"
    )


def _reasoning(item: dict[str, Any]) -> str:
    """The text of a reasoning item (its content, else its summary)."""
    if item.get("type") != "reasoning":
        return ""
    parts = item.get("content") or item.get("summary") or []
    return "".join(str(part.get("text", "")) for part in parts)


def _short(text: str, limit: int = 120) -> str:
    """One line, cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def response_id_of(value: Any) -> str | None:
    """The response id held by a value: a ``resp_…`` string, a Reply, a Response or a dict."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, dict):
        found = value.get("id")
        return str(found) if found else None
    found = getattr(value, "id", None)
    return found if isinstance(found, str) and found else None


def dumps(value: Any) -> str:
    """Compact JSON for tool arguments and outputs shown to people."""
    return json.dumps(value, separators=(",", ":"), default=str)
