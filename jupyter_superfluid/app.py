"""The Jupyter server extension: the same parts and routes inside Jupyter's Tornado app."""

from __future__ import annotations

import asyncio
from typing import Any

from jupyter_server.extension.application import ExtensionApp
from traitlets import Instance

from jupyter_superfluid.composition import Composition
from jupyter_superfluid.config import Superfluid
from jupyter_superfluid.web.base import concrete_handlers


class SuperfluidApp(ExtensionApp):
    """Serves OpenAI-compatible and LMSP endpoints under the Jupyter server's base URL."""

    name = "jupyter_superfluid"
    description = __doc__
    load_other_extensions = True
    classes = [Superfluid]

    superfluid = Instance(Superfluid, allow_none=True)
    composition: Composition | None = None

    def initialize_settings(self) -> None:
        """Build the parts from the server's config (``c.Superfluid.*``)."""
        self.superfluid = Superfluid(parent=self.serverapp, log=self.log)
        self.composition = Composition.build(self.superfluid)
        self.log.info("superfluid: serving %s", self.composition.describe())

    def initialize_handlers(self) -> None:
        """Register every route; ExtensionApp prefixes them with the base URL."""
        parts = self.composition
        assert parts is not None
        self.handlers.extend(concrete_handlers(parts.routes(), parts.access, jupyter=True))

    async def _start_jupyter_server_extension(self, serverapp: Any) -> None:
        """Resume interrupted downloads and begin loading the first model, if asked to."""
        if self.composition is not None:
            self._preload = asyncio.ensure_future(self.composition.start())

    async def stop_extension(self) -> None:
        """Stop the engines and close the store with the server."""
        if self.composition is not None:
            await self.composition.close()
