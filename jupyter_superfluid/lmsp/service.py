"""The LMSP layer's services, built once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Superfluid
from ..generation.stored_turns import StoredTurns
from ..models.hub import ModelHub
from ..sessions import Store
from .discovery import Discovery
from .idempotency import Idempotency
from .responses import LmspResponses
from .tasks import TaskRunner


@dataclass
class Lmsp:
    """Responses, tasks, idempotency and discovery of ``/lmsp/v1``."""

    responses: LmspResponses
    tasks: TaskRunner
    idempotency: Idempotency
    discovery: Discovery

    @classmethod
    def create(
        cls, lifecycle: StoredTurns, store: Store, models: ModelHub, config: Superfluid
    ) -> Lmsp:
        """Build the LMSP services on the shared stored-turn lifecycle and store."""
        responses = LmspResponses(lifecycle, models)
        return cls(
            responses,
            TaskRunner(responses, store),
            Idempotency(store),
            Discovery(models, config),
        )

    async def close(self) -> None:
        """Stop the running tasks (each ends failed, as after a restart)."""
        await self.tasks.close()
