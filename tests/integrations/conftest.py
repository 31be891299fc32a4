"""The ``jupyter_ai`` marker: tests that need the extra's cached site (see ``jupyter_ai_site``)."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker ``tests/support/prerequisites.py`` makes the site ready for."""
    config.addinivalue_line(
        "markers",
        "jupyter_ai: runs Jupyter AI's persona manager from the cached jupyter-ai site "
        "(tests/integrations/jupyter_ai_site.py)",
    )
