"""Every code example of the docs and the README is compiled, checked, or run.

``python`` blocks compile; those marked ``<!-- run -->`` run, and those marked
``<!-- run: server -->`` run against a live standalone server on the tiny models
(``markdown_blocks``). ``ipython`` blocks compile after IPython's transformations.
``json`` blocks parse. In ``bash`` blocks, every ``jupyter superfluid`` or
``python -m jupyter_superfluid`` command names a real subcommand and real flags, and
every ``--Superfluid.NAME`` is a trait.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex

import pytest

from jupyter_superfluid.config import CLI_ALIASES, Superfluid
from jupyter_superfluid.pytest_plugin import StandaloneServer
from tests.docs.markdown_blocks import Block, all_blocks

PYTHON = all_blocks("python")
COMMAND = re.compile(r"(?:jupyter[ -]superfluid|python3? -m jupyter_superfluid)\s+(.*)")
SUBCOMMANDS = {"serve", "build-llama-server"}
FLAGS = set(CLI_ALIASES) | {"help"}


def _ids(blocks: list[Block]) -> list[str]:
    return [b.name for b in blocks]


@pytest.mark.parametrize("block", PYTHON, ids=_ids(PYTHON))
def test_python_example_compiles(block: Block) -> None:
    compile(block.source, block.name, "exec")


IPYTHON = all_blocks("ipython")


@pytest.mark.parametrize("block", IPYTHON, ids=_ids(IPYTHON))
def test_ipython_example_compiles(block: Block) -> None:
    from IPython.core.inputtransformer2 import TransformerManager

    compile(TransformerManager().transform_cell(block.source), block.name, "exec")


JSON = all_blocks("json")


@pytest.mark.parametrize("block", JSON, ids=_ids(JSON))
def test_json_example_parses(block: Block) -> None:
    json.loads(block.source)


RUN = [b for b in PYTHON if b.run == ""]
RUN_ON_SERVER = [b for b in PYTHON if b.run == "server"]


def _run(block: Block) -> str:
    """Run one example in a namespace of its own; what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(block.source, block.name, "exec"), {"__name__": "__docs__"})
    return printed.getvalue()


def test_some_examples_run() -> None:
    assert RUN and RUN_ON_SERVER, "mark the examples that run: <!-- run --> or <!-- run: server -->"


@pytest.mark.parametrize("block", RUN, ids=_ids(RUN))
def test_self_contained_example_runs(block: Block) -> None:
    _run(block)


@pytest.mark.parametrize("block", RUN_ON_SERVER, ids=_ids(RUN_ON_SERVER))
def test_example_runs_against_a_server(
    block: Block, standalone: StandaloneServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SUPERFLUID_BASE_URL", standalone.base_url)
    monkeypatch.setenv("SUPERFLUID_API_KEY", "unused")
    source = block.source.replace("http://127.0.0.1:8453", standalone.url)
    _run(Block(block.path, block.line, block.lang, source, block.run))


def _commands(block: Block) -> list[str]:
    """The superfluid command lines of a bash block, continuation lines joined."""
    text = block.source.replace("\\\n", " ")
    return [m.group(1) for line in text.splitlines() if (m := COMMAND.search(line))]


BASH = [b for b in all_blocks("bash") if _commands(b) or "--Superfluid." in b.source]


@pytest.mark.parametrize("block", BASH, ids=_ids(BASH))
def test_bash_example_names_real_commands_and_flags(block: Block) -> None:
    for command in _commands(block):
        words = shlex.split(re.split(r"\s(?:#|&&|\|\|?|;)", command)[0])
        assert words[0] in SUBCOMMANDS, f"{block.name}: no subcommand {words[0]!r}"
        for word in words[1:]:
            if word.startswith("--"):
                assert word[2:].split("=")[0] in FLAGS, f"{block.name}: no flag {word}"
    traits = Superfluid.class_traits(config=True)
    for name in re.findall(r"--Superfluid\.(\w+)", block.source):
        assert name in traits, f"{block.name}: no trait Superfluid.{name}"
