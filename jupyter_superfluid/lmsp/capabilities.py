"""What each model can do, in LMSP's capability names, and the checks requests need.

Capabilities come from the model's chat codec (found by probing its template),
never from its name: ``reasoning`` when it has a thinking switch or effort levels.
The rest hold for every model this service runs: every model calls tools (in its
template's own syntax, or the generic format where the template has none), grammars
make ``structured_output`` work on any llama.cpp model, and streaming, stored
conversations and tasks are the service's own.
"""

from __future__ import annotations

from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.errors import UnsupportedCapability
from jupyter_superfluid.lmsp.protocol import LmspCreateRequest, SuperfluidExtension

NAMES = ("text", "streaming", "tools", "structured_output", "conversations", "reasoning", "tasks")


def model_capabilities(codec: ChatCodec) -> dict[str, bool]:
    """The LMSP capabilities of a model with this chat codec."""
    return {
        "text": True,
        "streaming": True,
        "tools": True,  # natively or through the generic tool format (chat.syntax.generic)
        "structured_output": True,
        "conversations": True,
        "reasoning": codec.has_thinking_switch or bool(codec.reasoning_efforts),
        "tasks": True,
    }


def needed(
    req: LmspCreateRequest, ext: SuperfluidExtension, *, task: bool = False
) -> dict[str, str]:
    """The capabilities a request needs, each with the field that needs it."""
    out: dict[str, str] = {"text": "input"}
    if req.stream and not task:
        out["streaming"] = "stream"
    if req.tools:
        out["tools"] = "tools"
    elif req.tool_choice != "auto":
        out["tools"] = "tool_choice"
    if req.response_format is not None and req.response_format.type == "json_schema":
        out["structured_output"] = "response_format"
    if req.previous_response_id is not None:
        out["conversations"] = "previous_response_id"
    if ext.reasoning_effort is not None:
        out["reasoning"] = "extensions.superfluid.reasoning_effort"
    if task:
        out["tasks"] = "model"
    return out


def check(
    model: str,
    caps: dict[str, bool],
    req: LmspCreateRequest,
    ext: SuperfluidExtension,
    *,
    task: bool = False,
) -> None:
    """Reject a request that needs a capability the model lacks (400)."""
    for name, param in needed(req, ext, task=task).items():
        if not caps.get(name, False):
            raise UnsupportedCapability(
                f"{param} needs the {name} capability, which the model {model} does not have",
                param=param,
            )
