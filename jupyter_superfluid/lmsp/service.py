"""The LMSP layer's services, built once by the composition root."""

from __future__ import annotations

from dataclasses import dataclass

from jupyter_superfluid.config import Superfluid
from jupyter_superfluid.generation.stored_turns import StoredTurns
from jupyter_superfluid.generation.tasks import TaskRunner
from jupyter_superfluid.lmsp.discovery import Discovery
from jupyter_superfluid.lmsp.idempotency import Idempotency
from jupyter_superfluid.lmsp.responses import LmspResponses
from jupyter_superfluid.lmsp.tasks import LmspTasks
from jupyter_superfluid.models.hub import ModelHub
from jupyter_superfluid.store import Store


@dataclass
class Lmsp:
    """Responses, tasks, idempotency and discovery of ``/lmsp/v1``."""

    responses: LmspResponses
    tasks: LmspTasks
    idempotency: Idempotency
    discovery: Discovery

    @classmethod
    def create(
        cls,
        turns: StoredTurns,
        store: Store,
        models: ModelHub,
        config: Superfluid,
        runner: TaskRunner | None = None,
    ) -> Lmsp:
        """Build the LMSP services on the shared stored turns, store and task runner."""
        responses = LmspResponses(turns, models)
        return cls(
            responses,
            LmspTasks(responses, store, runner or TaskRunner(store)),
            Idempotency(store),
            Discovery(models, config),
        )

    async def close(self) -> None:
        """Stop the running tasks (each ends failed, as after a restart)."""
        await self.tasks.close()
