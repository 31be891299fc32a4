"""Documentation generated from the code, so it cannot drift: the docs' two tables.

``python -m tools.doc_tables [FILE ...]`` rewrites the config table between the
``config-table`` markers of ``docs/reference/configuration.md``, and the table of
llama.cpp's chat templates (each one's derived syntax and probe results) between the
``template-table`` markers of ``docs/user-guide/chat-templates.md``; with FILEs, the
tables between those markers in the files given. Tests check that the pages match.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from jupyter_superfluid.config import CLI_ALIASES, Superfluid

DOCS = Path(__file__).resolve().parents[1] / "docs"
CONFIG_PAGE = DOCS / "reference" / "configuration.md"
TEMPLATES_PAGE = DOCS / "user-guide" / "chat-templates.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"
TEMPLATES_START = "<!-- template-table:start -->"
TEMPLATES_END = "<!-- template-table:end -->"
DYNAMIC_DEFAULTS = {
    "sessions_dir": "`<jupyter data dir>/superfluid/sessions`",
    "model_cache_dir": "`<jupyter data dir>/superfluid/models`",
}


def config_table() -> str:
    """The Markdown table of every ``Superfluid`` trait, its flag, default and help."""
    flags = {trait.split(".", 1)[1]: flag for flag, trait in CLI_ALIASES.items()}
    rows = ["| trait | flag | default | help |", "|---|---|---|---|"]
    for name, trait in Superfluid.class_traits(config=True).items():
        flag = f"`--{flags[name]}`" if name in flags else ""
        default = DYNAMIC_DEFAULTS.get(name) or f"`{trait.default_value_repr()}`"
        rows.append(f"| `{name}` | {flag} | {default} | {trait.help} |")
    return "\n".join(rows)


def templates_table() -> str:
    """The Markdown table of llama.cpp's corpus of chat templates (fetched if missing)."""
    from jupyter_superfluid.engine.remote.llama_sources import chat_templates
    from tools.template_corpus.report import report, table
    from tools.template_corpus.tiny_models import template_vocab

    paths = sorted(chat_templates(), key=lambda p: p.stem.lower())
    return table([report(p.stem, template_vocab(p.read_text())[0]) for p in paths])


def between(text: str, start: str, end: str) -> str:
    """The text between two markers, stripped (what a test compares with the table)."""
    return text[text.index(start) + len(start) : text.index(end)].strip()


def _replace(text: str, start: str, end: str, body: Callable[[], str]) -> str:
    if start not in text:
        return text  # the table is built only for a page that holds it
    block = f"{start}\n{body()}\n{end}"
    return re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)


def update_page(path: Path) -> bool:
    """Rewrite the tables whose markers the page holds; True when it changed."""
    text = path.read_text()
    new = _replace(text, START, END, config_table)
    new = _replace(new, TEMPLATES_START, TEMPLATES_END, templates_table)
    if new != text:
        path.write_text(new)
    return new != text


if __name__ == "__main__":
    for page in [Path(a) for a in sys.argv[1:]] or [CONFIG_PAGE, TEMPLATES_PAGE]:
        print(page, "updated" if update_page(page) else "up to date")
