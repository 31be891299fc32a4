"""Run in a subprocess with the ``jupyter-ai`` extra on ``PYTHONPATH``: one Jupyter AI session.

``python persona_driver.py SPEC.json``: SPEC holds the chat file (``chat_file``, read if
it exists and written back at the end, as Jupyter AI saves a ``.chat`` file), the chat's
path, the config of the persona (``c.SuperfluidPersona.…``), and the ``messages`` a user
sends. A real ``PersonaManager`` over a real ``YChat`` finds the persona through the
``jupyter_ai.personas`` entry points and constructs it as it does for every chat; each
message is added to the chat by the user and handed to the persona's ``on_message``
(what the manager's router calls). Writes, to ``out``, the chat's messages, the
persona's id, and how many distinct bodies each of its messages went through.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from jupyter_ai_persona_manager import PersonaManager
from jupyterlab_chat.models import NewMessage, User
from jupyterlab_chat.ychat import YChat
from traitlets.config import Config

PERSONA_CLASS = "SuperfluidPersona"


def open_chat(spec: dict[str, Any]) -> YChat:
    """The chat: its saved file if there is one, else a new chat; at its path."""
    chat = YChat()
    saved = Path(spec["chat_file"])
    if saved.exists():
        chat.set(saved.read_text())
    chat.initial_path = spec["chat_path"]
    chat.set_user(User(username="ada", name="Ada", display_name="Ada"))
    return chat


def watch_bodies(chat: YChat) -> dict[str, list[str]]:
    """Every distinct body each message had, in order, as the document changed."""
    seen: dict[str, list[str]] = {}

    def changed(_events: Any) -> None:
        for message in chat._get_messages():
            bodies = seen.setdefault(message["id"], [])
            if not bodies or bodies[-1] != message["body"]:
                bodies.append(message["body"])

    chat.ymessages.observe_deep(changed)
    return seen


async def main(spec: dict[str, Any]) -> dict[str, Any]:
    """One session: the manager, the persona, the user's messages, what the chat shows."""
    chat = open_chat(spec)
    root = Path(spec["root_dir"])
    manager = PersonaManager(
        chat=chat,
        root_dir=str(root),
        event_loop=asyncio.get_running_loop(),
        config=Config(spec["config"]),
    )
    personas = [p for p in manager.personas.values() if type(p).__name__ == PERSONA_CLASS]
    assert len(personas) == 1, f"personas found: {list(manager.personas)}"
    persona = personas[0]
    bodies = watch_bodies(chat)
    for text in spec["messages"]:
        message = chat.get_message(chat.add_message(NewMessage(body=text, sender="ada")))
        assert message is not None
        await persona.on_message(message)
    await manager.shutdown_personas()
    Path(spec["chat_file"]).write_text(chat.get())
    return {
        "persona_id": persona.id,
        "persona_user": chat._get_users().get(persona.id),
        "chat_id": chat.get_id(),
        "messages": chat._get_messages(),
        "bodies": bodies,
    }


if __name__ == "__main__":
    spec = json.loads(Path(sys.argv[1]).read_text())
    result = asyncio.run(main(spec))
    Path(spec["out"]).write_text(json.dumps(result))
