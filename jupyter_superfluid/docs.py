"""Documentation generated from the code, so it cannot drift: the README's config table.

``python -m jupyter_superfluid.docs`` rewrites the table between the README's
``config-table`` markers; a test checks that the README matches.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .config import CLI_ALIASES, Superfluid

START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"
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


def update_readme(path: Path) -> bool:
    """Rewrite the README's table; True when it changed."""
    text = path.read_text()
    block = f"{START}\n{config_table()}\n{END}"
    new = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    if new != text:
        path.write_text(new)
    return new != text


if __name__ == "__main__":
    readme = Path(sys.argv[1] if len(sys.argv) > 1 else "README.md")
    print("updated" if update_readme(readme) else "up to date")
