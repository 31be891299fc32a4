"""The docs build, offline, with every Sphinx warning an error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.docs.markdown_blocks import DOCS, ROOT

# What a page may load when it is read: only what the build wrote beside it.
REMOTE_ASSET = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"(?:https?:)?//", re.I)


def test_docs_build_with_warnings_as_errors(tmp_path: Path) -> None:
    out = tmp_path / "html"
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", str(DOCS), str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-8000:]
    assert (out / "index.html").is_file()
    remote = [
        f"{page.relative_to(out)}: {m.group(0)}"
        for page in out.rglob("*.html")
        for m in REMOTE_ASSET.finditer(page.read_text())
    ]
    assert not remote, "pages load assets from the network:\n" + "\n".join(remote)
