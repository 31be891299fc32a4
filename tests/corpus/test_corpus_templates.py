"""Every corpus template, without a model: probe conversations, derived syntax, reasoning
split by its parser, effort mapping, and the docs' table of them
(``docs/user-guide/chat-templates.md``).
"""

from __future__ import annotations

import pytest

from jupyter_superfluid.chat.environment import TemplateRefusal
from jupyter_superfluid.chat.types import ItemDone
from tests.corpus.corpus_models import corpus
from tools import doc_tables
from tools.template_corpus.report import probe_conversations

NAMES = sorted(corpus(), key=str.lower)
# The conversations a template refuses, as the docs document them (answered 400).
REFUSED = {
    ("meta-llama-Llama-3.1-8B-Instruct", "two calls"),
    ("meta-llama-Llama-3.2-3B-Instruct", "two calls"),
    ("meta-llama-Llama-3.3-70B-Instruct", "two calls"),
}


def test_the_corpus_is_llama_cpp_s_templates() -> None:
    assert len(NAMES) == 70


@pytest.mark.parametrize("name", NAMES)
def test_probe_conversations_render_or_give_the_documented_400(name: str) -> None:
    codec = corpus()[name].codec
    for probe, (messages, tools) in probe_conversations().items():
        if (name, probe) in REFUSED:
            with pytest.raises(TemplateRefusal, match="refuses this conversation"):
                codec.render(messages, tools=tools)
        else:
            assert codec.render(messages, tools=tools)


def test_nearly_every_template_that_shows_tools_has_its_call_syntax_derived() -> None:
    shows = [n for n in NAMES if corpus()[n].codec.syntax.describes_tools]
    native = [n for n in shows if corpus()[n].codec.syntax.renders_calls]
    # The ones left (they render no calls of their own) call through the generic format.
    assert sorted(set(shows) - set(native)) == [
        "LFM2-8B-A1B",
        "LFM2.5-Instruct",
        "ibm-granite-granite-3.3-2B-Instruct",
    ]


@pytest.mark.parametrize("name", [n for n in NAMES if corpus()[n].codec.syntax.reasoning])
def test_the_parser_splits_the_template_s_reasoning(name: str) -> None:
    codec = corpus()[name].codec
    found = codec.syntax.reasoning
    assert found is not None
    parser = codec.output_parser(opens_reasoning=not found.open)
    ends = codec.syntax.ends or ("</s>",)
    text = f"{found.open}Plan it.{found.close}{found.gap}It is sunny.{ends[0]}"
    items = [e.item for e in parser.feed(text) + parser.finish() if isinstance(e, ItemDone)]
    assert [(i.kind, i.text) for i in items] == [
        ("reasoning", "Plan it."),
        ("message", "It is sunny."),
    ]


@pytest.mark.parametrize("name", NAMES)
def test_reasoning_effort_maps_to_the_template_s_own_switch(name: str) -> None:
    codec = corpus()[name].codec
    none, high = codec.template_kwargs_for_effort("none"), codec.template_kwargs_for_effort("high")
    if codec.thinking_switch and "none" not in codec.reasoning_efforts:
        assert none == {codec.thinking_switch: False}
    if "high" in codec.reasoning_efforts:
        assert high == {"reasoning_effort": "high"}
    elif codec.thinking_switch:
        assert high == {codec.thinking_switch: True}
    else:
        assert high == {}


def test_docs_table_matches_the_corpus() -> None:
    text = doc_tables.TEMPLATES_PAGE.read_text()
    table = doc_tables.between(text, doc_tables.TEMPLATES_START, doc_tables.TEMPLATES_END)
    assert table == doc_tables.templates_table(), "run: python -m tools.doc_tables"
