"""A model ready to serve: its engine and the codec of its chat template."""

from __future__ import annotations

from dataclasses import dataclass

from jupyter_superfluid.chat.codec import ChatCodec
from jupyter_superfluid.engine.base import Engine


@dataclass(frozen=True)
class LoadedModel:
    """A model ready to serve: its engine and the codec of its chat template."""

    id: str
    engine: Engine
    codec: ChatCodec


def with_codec(model_id: str, engine: Engine) -> LoadedModel:
    """The loaded model with its chat codec (probing the template: real work, in a thread)."""
    info = engine.info
    # What the model's end-of-generation tokens read as: the parser ends a turn at them.
    ends = tuple(engine.detokenize([token]) for token in info.eog_token_ids)
    codec = ChatCodec(
        info.chat_template or FALLBACK_TEMPLATE,
        bos_token=info.bos_token,
        eos_token=info.eos_token,
        end_tokens=ends,
    )
    return LoadedModel(model_id, engine, codec)


# ChatML, for a GGUF that carries no template of its own.
FALLBACK_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
