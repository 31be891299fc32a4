"""Sphinx configuration of the jupyter_superfluid docs (MyST Markdown, pydata theme).

Built offline and with warnings as errors by ``tests/docs/test_docs.py``:
``python -m sphinx -W -b html docs docs/_build/html``. Nothing here fetches anything.
"""

from __future__ import annotations

from jupyter_superfluid._version import __version__

project = "jupyter_superfluid"
author = "the jupyter_superfluid developers"
copyright = "the jupyter_superfluid developers"
version = release = __version__

extensions = ["myst_parser"]  # no intersphinx: the build never reaches the network
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
myst_heading_anchors = 3  # `page.md#a-heading` links resolve, and are checked
myst_enable_extensions = ["colon_fence"]

html_theme = "pydata_sphinx_theme"
html_title = "jupyter_superfluid"
html_static_path = ["_static"]
html_theme_options = {
    # Nothing that reaches the network at build or read time.
    "icon_links": [],
    "navigation_with_keys": False,
    "show_version_warning_banner": False,
    "use_edit_page_button": False,
    "navbar_end": ["theme-switcher", "navbar-icon-links"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_show_sourcelink = False
