"""The server process never holds llama.cpp: models, grammars and tokenizing live elsewhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def native_libraries(pid: int) -> set[str]:
    """File names of the shared libraries mapped into process ``pid``."""
    maps = Path(f"/proc/{pid}/maps").read_text()
    return {Path(line.split()[-1]).name for line in maps.splitlines() if ".so" in line}


def test_the_server_process_never_loads_llama_cpp(standalone: Any, openai_client: Any) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    out = openai_client.responses.create(
        model="superfluid/tiny-qwen3",
        input="A number.",
        max_output_tokens=16,
        extra_body={"seed": 1},
        reasoning={"effort": "none"},
        text={"format": {"type": "json_schema", "name": "n", "schema": schema}},
    )
    assert out.status == "incomplete" and out.usage.output_tokens == 16  # seed 1: a long number
    libraries = native_libraries(standalone.process.pid)
    assert libraries, "the server's maps list shared libraries"
    assert not {name for name in libraries if "llama" in name or "ggml" in name}
