"""The front-end contract on the Python side: module name, version, and detection.

The TypeScript side (``labextension/src/contract.ts``) registers its models and views
under the same module name and version; the version is the Python package's, so a
kernel and a front-end from different releases refuse each other instead of
misrendering.
"""

from __future__ import annotations

import os
from typing import Any

from jupyter_superfluid._version import __version__

MODULE_NAME = "jupyter-superfluid"
MODULE_VERSION = __version__
ENV_WIDGETS = "SUPERFLUID_WIDGETS"  # "1": always use the widgets; "0": never
_ON = ("1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


def widgets_importable() -> bool:
    """Whether ipywidgets can be imported here."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def frontend_available(shell: Any = None) -> bool:
    """Whether this kernel's front-end can show the superfluid widgets.

    True in a kernel whose current request came from JupyterLab or Notebook 7 (their
    execute requests carry a ``cellId``), with ipywidgets importable. The environment
    variable ``SUPERFLUID_WIDGETS`` forces it: ``1`` on (any kernel), ``0`` off.
    """
    forced = os.environ.get(ENV_WIDGETS, "").strip().lower()
    if forced in _OFF:
        return False
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if kernel is None or not widgets_importable():
        return False
    if forced in _ON:
        return True
    return "cellId" in (_parent_metadata(kernel) or {})


def _parent_metadata(kernel: Any) -> dict[str, Any] | None:
    """The metadata of the request the kernel is handling (ipykernel 6 and 7)."""
    try:
        parent = kernel.get_parent()
    except TypeError:  # ipykernel 6 wants the channel
        parent = kernel.get_parent("shell")
    except Exception:
        return None
    metadata = (parent or {}).get("metadata")
    return metadata if isinstance(metadata, dict) else None
