"""``%%respond`` on a bare IPython shell against the standalone server (tiny models)."""

from __future__ import annotations

import enum
import json
import time
from typing import Any, Literal

import httpx
import openai
import pytest
from IPython.core.error import UsageError
from pydantic import BaseModel

from jupyter_superfluid.notebook.render import register_renderer, unregister_renderer
from jupyter_superfluid.notebook.result import Reply

CHATML = "superfluid/tiny-chatml"
QWEN = "superfluid/tiny-qwen3"


def respond(shell: Any, line: str, body: str = "Hello") -> Any:
    """Run a ``%%respond`` cell and return its value."""
    return shell.run_cell_magic("respond", line, body)


def previous(openai_client: Any, reply: Reply) -> str | None:
    """The previous_response_id the server stored for ``reply``."""
    return openai_client.responses.retrieve(reply.id).previous_response_id


def first_input_text(openai_client: Any, response_id: str) -> str:
    """The text of the first input item the server stored for a response."""
    items = openai_client.responses.input_items.list(response_id, order="asc").data
    return items[0].content[0].text


def test_continues_starts_fresh_and_branches(shell, openai_client):
    a = respond(shell, f"-m {CHATML} --max-tokens 4 --new")
    b = respond(shell, "--max-tokens 4")
    assert isinstance(a, Reply) and a.id.startswith("resp_")
    assert previous(openai_client, a) is None and previous(openai_client, b) == a.id
    assert b.model == CHATML  # a continuation keeps the conversation's model
    fresh = respond(shell, f"-m {CHATML} --max-tokens 4 --new")
    assert previous(openai_client, fresh) is None
    shell.user_ns.update(first=a, first_id=b.id, raw=openai_client.responses.retrieve(a.id))
    from_reply = respond(shell, "--max-tokens 4 --from first")
    from_str_var = respond(shell, "--max-tokens 4 --from first_id")
    from_response = respond(shell, "--max-tokens 4 --from raw")
    from_literal = respond(shell, f"--max-tokens 4 --from {fresh.id}")
    assert previous(openai_client, from_reply) == a.id
    assert previous(openai_client, from_str_var) == b.id
    assert previous(openai_client, from_response) == a.id
    assert previous(openai_client, from_literal) == fresh.id
    after = respond(shell, "--max-tokens 4")  # the branch is now the conversation
    assert previous(openai_client, after) == from_literal.id


def test_line_magic_shows_and_sets_defaults(shell, openai_client, capsys):
    shell.run_line_magic("respond", f"-m {CHATML} --max-tokens 3 -i 'Be terse.'")
    shown = capsys.readouterr().out
    assert "model='superfluid/tiny-chatml'" in shown and "max_tokens=3" in shown
    assert "conversation: new" in shown and "SUPERFLUID_BASE_URL" in shown
    r = respond(shell, "--new --seed 1")
    assert r.model == CHATML and r.usage.output_tokens <= 3
    assert openai_client.responses.retrieve(r.id).instructions == "Be terse."
    shell.run_line_magic("respond", "")
    assert f"continues {r.id}" in capsys.readouterr().out
    shell.run_line_magic("respond", "--new")
    assert "conversation: new" in capsys.readouterr().out
    assert previous(openai_client, respond(shell, "")) is None
    shell.run_line_magic("respond", f"--from {r.id}")
    assert previous(openai_client, respond(shell, "")) == r.id
    shell.run_line_magic("respond", "--reset")
    assert "defaults: none set" in capsys.readouterr().out


def test_interpolation_and_escaping(shell, openai_client):
    class Box:
        name = "ada"

    shell.user_ns.update(x=42, box=Box(), d={"k": "v"}, items=[1, 2])
    body = "x={x} name={box.name} d={d[k]} first={items[0]} pi={p:.2f} {{literal}} }}{{"
    shell.user_ns["p"] = 3.14159
    r = respond(shell, f"-m {CHATML} --new --max-tokens 2", body)
    expected = "x=42 name=ada d=v first=1 pi=3.14 {literal} }{"
    assert first_input_text(openai_client, r.id) == expected


def test_streams_text_as_it_arrives_and_no_stream_waits(shell, capsys):
    r = respond(shell, f"-m {QWEN} --new --max-tokens 40 --seed 2")
    out = capsys.readouterr().out
    assert out.startswith("[thinking] ") and r.reasoning_text in out
    assert r.output_text in out
    quiet = respond(shell, f"-m {CHATML} --new --max-tokens 6 --seed 2 --no-stream")
    assert quiet.status in ("completed", "incomplete")
    assert quiet.output_text in capsys.readouterr().out


def test_reply_reprs(shell):
    from IPython.lib.pretty import pretty

    r = respond(shell, f"-m {QWEN} --new --max-tokens 40 --seed 2")
    usage = r.usage
    line = f"{usage.input_tokens} in ({usage.input_tokens_details.cached_tokens} cached)"
    md = r._repr_markdown_()
    assert "<details><summary>thinking…</summary>" in md and line in md and r.id in md
    text = pretty(r)
    assert text.startswith("[thinking]") and line in text and r.id in text
    assert r.output_text == r.response.output_text  # attributes fall through to the Response


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Pick(BaseModel):
    color: Color
    size: Literal["s", "m", "l"]
    count: int


def test_schema_returns_a_validated_pydantic_object(shell, openai_client):
    shell.user_ns["Pick"] = Pick
    value = respond(shell, f"-m {CHATML} --new --max-tokens 120 --seed 4 --schema Pick -o picked")
    assert isinstance(value, Pick) and isinstance(value.color, Color)
    assert shell.user_ns["picked"] is value
    magics = shell.magics_manager.registry["RespondMagics"]
    stored = openai_client.responses.retrieve(magics.session.last.id)
    assert stored.text.format.type == "json_schema" and stored.text.format.name == "Pick"
    assert Pick.model_validate_json(stored.output_text) == value


def test_schema_as_a_json_schema_dict(shell):
    shell.user_ns["spec"] = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}},
        "required": ["n", "ok"],
        "additionalProperties": False,
    }
    value = respond(shell, f"-m {CHATML} --new --max-tokens 120 --seed 4 --schema spec")
    assert isinstance(value, dict) and set(value) == {"n", "ok"}
    assert isinstance(value["n"], int) and isinstance(value["ok"], bool)


def _items(openai_client: Any, response_id: str) -> list[Any]:
    return openai_client.responses.input_items.list(response_id, order="asc").data


def test_tools_run_a_real_tool_loop(shell, openai_client):
    calls: list[str] = []

    def get_weather(city: Literal["Paris", "Oslo"]) -> dict[str, Any]:
        """Get the current weather.

        Args:
            city: The city to look up.
        """
        calls.append(city)
        return {"city": city, "temp": 17}

    shell.user_ns["get_weather"] = get_weather
    line = f"-m {QWEN} --new --tools get_weather --tool-choice required --max-rounds 2"
    r = respond(shell, line + " --reasoning none --max-tokens 200 --seed 5", "Weather?")
    assert len(calls) == 1 and calls[0] in ("Paris", "Oslo")  # ran in the kernel, parsed
    assert len(r.rounds) == 1 and not r.function_calls  # the second round answered
    first = r.rounds[0]
    (call,) = first.function_calls
    assert json.loads(call["arguments"]) == {"city": calls[0]}
    assert previous(openai_client, r) == first.id
    (sent,) = _items(openai_client, r.id)
    assert sent.type == "function_call_output" and sent.call_id == call["call_id"]
    assert json.loads(sent.output) == {"city": calls[0], "temp": 17}
    assert r.tool_results[0].output == sent.output
    stored = openai_client.responses.retrieve(first.id)
    assert stored.tools[0].name == "get_weather"
    assert stored.tools[0].parameters["properties"]["city"]["description"] == "The city to look up."


def test_a_raising_tool_sends_its_error_back(shell, openai_client):
    def lookup(customer: int) -> str:
        """Find a customer."""
        raise LookupError(f"no customer {customer}")

    shell.user_ns["lookup"] = lookup
    line = f"-m {QWEN} --new --tools lookup --tool-choice lookup --max-rounds 2 --reasoning none"
    r = respond(shell, line + " --max-tokens 200 --seed 5", "Customer?")
    (sent,) = _items(openai_client, r.id)
    assert sent.type == "function_call_output"
    assert sent.output.startswith("LookupError: no customer ")


def test_max_rounds_bounds_the_loop(shell):
    ran: list[int] = []
    shell.user_ns["ping"] = lambda n: ran.append(n) or "pong"
    line = f"-m {QWEN} --new --tools ping --tool-choice required --max-rounds 1 --reasoning none"
    r = respond(shell, line + " --max-tokens 200 --seed 5")
    assert ran == [] and len(r.function_calls) == 1 and r.rounds == []
    assert "(not run)" in r._repr_markdown_()


class _Interrupting:
    """A renderer that presses the stop button at the first streamed text."""

    def __init__(self) -> None:
        self.response_id: str | None = None
        self.finished: tuple[Any, Any] | None = None

    def start(self, meta: Any) -> None:
        pass

    def on_event(self, event: Any) -> None:
        if event["type"] == "response.created":
            self.response_id = event["response"]["id"]
        if event["type"] == "response.output_text.delta":
            raise KeyboardInterrupt

    def finish(self, reply: Any, error: Any = None) -> None:
        self.finished = (reply, error)


LONG = {  # the grammar forces a long answer: the stream is surely still open when we stop
    "type": "object",
    "properties": {"s": {"type": "string", "minLength": 1500}},
    "required": ["s"],
}


def test_interrupt_cancels_on_the_server(shell, openai_client):
    head = respond(shell, f"-m {CHATML} --new --max-tokens 3")
    renderer = _Interrupting()

    def factory(_shell: Any) -> _Interrupting:
        return renderer

    register_renderer(factory)
    shell.user_ns["LONG"] = LONG
    try:
        with pytest.raises(KeyboardInterrupt):
            respond(shell, f"--max-tokens 1900 --seed 1 --schema LONG -m {CHATML}")
    finally:
        unregister_renderer(factory)
    assert renderer.response_id and renderer.finished is not None
    reply, error = renderer.finished
    assert reply is None and "cancelled" in error
    deadline = time.monotonic() + 3  # longer than the whole generation would take
    while time.monotonic() < deadline:
        with pytest.raises(openai.NotFoundError):
            openai_client.responses.retrieve(renderer.response_id)
        time.sleep(0.3)
    after = respond(shell, "--max-tokens 3")  # the conversation did not move
    assert previous(openai_client, after) == head.id


@pytest.mark.parametrize(
    ("line", "body", "message"),
    [
        ("-m ghost --new", "x", "400 model_not_found: model 'ghost' not found"),
        (f"-m {CHATML} --from resp_nope", "x", "400 previous_response_not_found"),
        (f"-m {CHATML} --temperature hot", "x", "argument --temperature: invalid float value"),
        (f"-m {CHATML} --reasoning max", "x", "argument --reasoning: invalid choice"),
        (f"-m {CHATML} --bogus", "x", "unrecognized arguments: --bogus"),
        (f"-m {CHATML} --new --from x", "x", "--new and --from exclude each other"),
        (f"-m {CHATML} --schema Missing", "x", "--schema 'Missing': no such variable"),
        (f"-m {CHATML} --schema number", "x", "expected a pydantic model class or a JSON schema"),
        (f"-m {CHATML} --schema broken", "x", "--schema broken: not a valid JSON schema at"),
        (f"-m {CHATML} --tools number", "x", "--tools number: not a function"),
        (f"-m {CHATML} --tools nothing", "x", "--tools 'nothing': no such variable"),
        (f"-m {CHATML}", "hi {nobody}", "{nobody} in the cell: no such variable"),
        (f"-m {CHATML}", "a } b", "Single '}' encountered"),
        (f"-m {CHATML}", "  \n", "the cell is empty"),
        (f"-m {CHATML} extra", "x", "takes no positional arguments"),
        (f"-m {CHATML} --max-rounds 0", "x", "--max-rounds must be at least 1"),
        (f"-m {CHATML} -i 'unclosed", "x", "cannot read the options: No closing quotation"),
    ],
)
def test_errors_are_one_readable_line(shell, line, body, message):
    shell.user_ns.update(number=5, broken={"type": "object", "properties": {"a": {"type": "nope"}}})
    with pytest.raises(UsageError) as info:
        respond(shell, line, body)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_schema_output_cut_short_is_reported(shell):
    shell.user_ns["LONG"] = LONG
    with pytest.raises(UsageError, match="cut at the token limit"):
        respond(shell, f"-m {CHATML} --new --max-tokens 5 --schema LONG")


def test_unreachable_server_and_the_shell_shows_no_traceback(shell, monkeypatch, capsys):
    from jupyter_superfluid.pytest_plugin import free_port

    monkeypatch.setenv("SUPERFLUID_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    shell.run_cell(f"%%respond -m {CHATML}\nHello")
    captured = capsys.readouterr()
    err = captured.err + captured.out
    assert "UsageError: cannot reach the superfluid server at http://127.0.0.1:" in err
    assert "Traceback" not in err


def test_line_magic_rejects_cell_only_options(shell):
    with pytest.raises(UsageError, match="--schema applies to a %%respond cell only"):
        shell.run_line_magic("respond", "--schema X")


def test_lmsp_round_trip(shell, standalone, capsys):
    a = respond(shell, f"-m {CHATML} --new --lmsp --max-tokens 6 --seed 1")
    assert a.id.startswith("resp_") and a.status in ("completed", "incomplete")
    assert a.output_text in capsys.readouterr().out
    b = respond(shell, "--lmsp --max-tokens 6 --no-stream")
    c = respond(shell, "--max-tokens 4")  # and on through the OpenAI API
    assert b.previous_response_id == a.id and b.id.startswith("resp_")
    listing = httpx.get(standalone.base_url + "/responses", params={"limit": 10}, timeout=30)
    links = {r["id"]: r["previous_response_id"] for r in listing.json()["data"]}
    assert links[b.id] == a.id and links[c.id] == b.id
    with pytest.raises(UsageError, match=r"^400 model_not_found: "):
        respond(shell, "--lmsp -m ghost --new")
