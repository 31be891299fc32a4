"""Functions as tools (schema from signature and docstring, calls) and the renderers."""

from __future__ import annotations

import enum
import io
import json
from typing import Any, Literal, Optional

from pydantic import BaseModel

from jupyter_superfluid.notebook.render import DisplayRenderer, TextRenderer, choose_renderer
from jupyter_superfluid.notebook.result import Reply
from jupyter_superfluid.notebook.tools import call_tool, function_tool, parse_docstring


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


class Point(BaseModel):
    x: int
    y: int


def forecast(
    city: Literal["Paris", "Oslo"],
    days: int,
    unit: Unit = Unit.C,
    scale: float = 1.0,
    hourly: bool = False,
    tags: list[str] | None = None,
    limits: dict[str, int] | None = None,
    at: Optional[Point] = None,  # noqa: UP045 (Optional is what people write, too)
    json: str = "",
) -> dict[str, Any]:
    """Forecast the weather.

    More words that are not the description.

    Args:
        city: The city.
        days (int): How many days,
            counted from today.
        json: A name that BaseModel also has.

    Returns:
        The forecast.
    """
    return {"city": city, "days": days, "unit": unit, "at": at, "json": json}


def test_schema_from_signature_hints_and_docstring():
    spec = function_tool(forecast).spec
    assert spec["name"] == "forecast" and spec["description"] == "Forecast the weather."
    params = spec["parameters"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == ["city", "days"]
    props = params["properties"]
    assert props["city"] == {
        "enum": ["Paris", "Oslo"],
        "type": "string",
        "description": "The city.",
    }
    assert props["days"] == {
        "type": "integer",
        "description": "How many days, counted from today.",
    }
    assert props["unit"]["$ref"] == "#/$defs/Unit"
    assert params["$defs"]["Unit"] == {"enum": ["celsius", "fahrenheit"], "type": "string"}
    assert props["scale"]["type"] == "number" and props["hourly"]["type"] == "boolean"
    assert props["tags"]["anyOf"][0] == {"items": {"type": "string"}, "type": "array"}
    assert props["limits"]["anyOf"][0]["additionalProperties"] == {"type": "integer"}
    assert {"type": "null"} in props["at"]["anyOf"] and "Point" in params["$defs"]
    assert props["json"]["description"] == "A name that BaseModel also has."
    assert "title" not in json.dumps(params)


def test_calls_convert_arguments_and_report_errors():
    tool = function_tool(forecast)
    out = call_tool(
        tool, '{"city": "Oslo", "days": 2, "unit": "fahrenheit", "at": {"x": 1, "y": 2}}'
    )
    assert json.loads(out) == {
        "city": "Oslo",
        "days": 2,
        "unit": "fahrenheit",
        "at": {"x": 1, "y": 2},
        "json": "",
    }
    bad = call_tool(tool, '{"city": "Rome", "days": "many"}')
    assert bad.startswith("invalid arguments for forecast: city: Input should be")
    assert "days: Input should be a valid integer" in bad
    assert call_tool(tool, '{"city": "Oslo", "days": 1, "extra": 1}').startswith("invalid")

    def boom(n: int) -> str:
        raise RuntimeError(f"broke on {n}")

    assert call_tool(function_tool(boom), '{"n": 3}') == "RuntimeError: broke on 3"


def test_sphinx_docstrings_positional_only_and_untyped():
    def lookup(key, /, limit: int = 5, **rest: Any) -> list[str]:
        """:param key: What to find.
        :param int limit: At most this many.
        """
        return [key] * limit

    tool = function_tool(lookup)
    assert "description" not in tool.spec
    props = tool.spec["parameters"]["properties"]
    assert props == {
        "key": {"description": "What to find."},
        "limit": {"default": 5, "type": "integer", "description": "At most this many."},
    }
    assert json.loads(call_tool(tool, '{"key": "a", "limit": 2}')) == ["a", "a"]


def test_parse_docstring_stops_at_the_next_section():
    summary, params = parse_docstring("Do it.\n\nArgs:\n    a: first\nRaises:\n    b: not a param")
    assert summary == "Do it." and params == {"a": "first"}


EVENTS = [
    {"type": "response.created", "response": {"id": "resp_1"}},
    {"type": "response.reasoning_text.delta", "delta": "hmm <b>"},
    {"type": "response.reasoning_text.delta", "delta": " ok"},
    {"type": "response.output_text.delta", "delta": "Hi"},
    {"type": "response.output_text.delta", "delta": " there"},
    {
        "type": "response.output_item.done",
        "item": {"type": "function_call", "name": "f", "arguments": '{"a":1}'},
    },
    {"type": "superfluid.tool_output", "name": "f", "output": "42"},
]


def test_text_renderer_writes_as_it_streams():
    out = io.StringIO()
    renderer = TextRenderer(out)
    for event in EVENTS:
        renderer.on_event(event)
    renderer.finish(None, "interrupted")
    assert out.getvalue() == (
        '[thinking] hmm <b> ok [/thinking]\nHi there\n→ f({"a":1})\n← f: 42\n[interrupted]\n'
    )


def test_display_renderer_bundle_marks_reasoning_and_escapes():
    renderer = DisplayRenderer()
    for event in EVENTS:
        renderer.on_event(event)
    bundle = renderer.bundle()
    assert bundle["text/plain"].startswith("[thinking] hmm <b> ok\nHi there\n→ f(")
    assert "<details" in bundle["text/html"] and "hmm &lt;b&gt; ok" in bundle["text/html"]


def test_renderer_choice():
    class Kernelish:
        kernel = object()

    assert isinstance(choose_renderer(object()), TextRenderer)
    assert isinstance(choose_renderer(Kernelish()), DisplayRenderer)


def test_reply_over_a_plain_dict():
    reply = Reply(
        {
            "id": "resp_2",
            "status": "completed",
            "model": "m",
            "output": [
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
                {"type": "message", "content": [{"type": "output_text", "text": "Hello"}]},
            ],
            "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
        }
    )
    assert (reply.id, reply.output_text, reply.reasoning_text) == ("resp_2", "Hello", "think")
    assert (
        reply.status == "completed"
        and reply.usage_line() == "m · completed · 3 in · 2 out · resp_2"
    )
