"""Images and audio as chat input: parsing wire parts, checking models, tokenizing prompts.

Every protocol's media part (Responses ``input_image``/``input_audio``, chat
completions ``image_url``/``input_audio``) becomes a neutral ``MediaInput``
whose message content holds ``MEDIA_MARKER`` in its place. The chat path
checks the kinds against the model (``check_kinds``) and tokenizes the
rendered prompt text with its media (``tokenize``, blocking).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from jupyter_superfluid.chat.types import ChatMessage, MediaInput, MediaKind
from jupyter_superfluid.engine.base import MEDIA_MARKER, Engine, MediaError, MediaRef, ModelInfo
from jupyter_superfluid.errors import InvalidRequest
from jupyter_superfluid.media_sniff import sniff_media

__all__ = ["MEDIA_MARKER", "audio_part", "check_kinds", "gather", "image_url_part", "tokenize"]

AUDIO_FORMATS = ("wav", "mp3")
_WHITESPACE = re.compile(rb"\s+")


def decode_data_url(url: str, param: str) -> bytes:
    """The bytes of a ``data:`` URL (base64 or percent-encoded); 400 naming ``param`` if bad."""
    header, comma, payload = url.partition(",")
    if not url.startswith("data:") or not comma:
        raise InvalidRequest(f"{param} is not a valid data: URL", param=param)
    if header.endswith(";base64"):
        data = decode_base64(payload, param)
    else:
        data = unquote_to_bytes(payload)
    if not data:
        raise InvalidRequest(f"{param}: the data: URL holds no data", param=param)
    return data


def decode_base64(text: Any, param: str) -> bytes:
    """Strict base64 (whitespace ignored); 400 naming ``param`` if it is not."""
    if not isinstance(text, str):
        raise InvalidRequest(f"{param} must be a base64 string", param=param)
    try:
        return base64.b64decode(_WHITESPACE.sub(b"", text.encode("ascii")), validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError) as err:
        raise InvalidRequest(f"{param} is not valid base64: {err}", param=param) from err


def image_url_part(url: Any, param: str, url_param: str) -> MediaInput:
    """An image given by URL: a ``data:`` URL is decoded; remote URLs are refused."""
    if not isinstance(url, str) or not url.startswith("data:"):
        raise InvalidRequest(
            "images must be given as data: URLs; remote URLs are refused",
            param=url_param,
            code="unsupported_input",
        )
    return MediaInput("image", decode_data_url(url, url_param), param)


def audio_part(part: dict[str, Any], param: str) -> MediaInput:
    """``{"type": "input_audio", "input_audio": {"data": base64, "format": "wav"|"mp3"}}``."""
    audio = part.get("input_audio")
    if not isinstance(audio, dict):
        raise InvalidRequest(
            f"{param}.input_audio must be an object with data and format",
            param=f"{param}.input_audio",
        )
    fmt = audio.get("format")
    if fmt is not None and fmt not in AUDIO_FORMATS:
        raise InvalidRequest(
            f"{param}.input_audio.format must be one of {', '.join(AUDIO_FORMATS)}",
            param=f"{param}.input_audio.format",
        )
    data = decode_base64(audio.get("data"), f"{param}.input_audio.data")
    if not data:
        raise InvalidRequest(
            f"{param}.input_audio.data is empty", param=f"{param}.input_audio.data"
        )
    return MediaInput("audio", data, param)


def gather(messages: Iterable[ChatMessage]) -> tuple[MediaInput, ...]:
    """Every medium of ``messages``, in prompt order."""
    return tuple(m for message in messages for m in message.media)


def check_kinds(media: Sequence[MediaInput], info: ModelInfo) -> None:
    """400 ``unsupported_input`` naming the first medium of a kind the model does not take."""
    for medium in media:
        accepts = info.accepts_images if medium.kind == "image" else info.accepts_audio
        if not accepts:
            what = "images" if medium.kind == "image" else "audio"
            raise InvalidRequest(
                f"{medium.param}: the model {info.id} does not accept {what}",
                param=medium.param,
                code="unsupported_input",
            )


def _invalid(medium: MediaInput, reason: str) -> InvalidRequest:
    return InvalidRequest(
        f"{medium.param}: {reason}", param=medium.param, code=f"invalid_{medium.kind}"
    )


def tokenize(
    engine: Engine, text: str, media: Sequence[MediaInput]
) -> tuple[tuple[int, ...], tuple[MediaRef, ...]]:
    """Placeholder token ids and media references of a rendered prompt (blocking).

    ``text`` holds one ``MEDIA_MARKER`` per medium; engine errors become 400s
    naming the part at fault. The media's embeddings stay in the engine.
    """
    if text.count(MEDIA_MARKER) != len(media):
        raise InvalidRequest(
            f"text must not contain {MEDIA_MARKER!r} in a request with images or audio"
        )
    for medium in media:
        found = sniff_media(medium.data)
        if found != medium.kind:
            expected: dict[MediaKind, str] = {
                "image": "an image (PNG, JPEG, GIF or BMP)",
                "audio": "audio (WAV, MP3 or FLAC)",
            }
            raise _invalid(medium, f"the data is not {expected[medium.kind]}")
    try:
        prompt = engine.tokenize_media(text, [m.data for m in media])
    except MediaError as err:
        if err.index is not None and 0 <= err.index < len(media):
            raise _invalid(media[err.index], str(err)) from err
        raise InvalidRequest(f"cannot use the media of this request: {err}") from err
    return prompt.tokens, prompt.media


def describe(media: Sequence[MediaInput]) -> list[dict[str, Any]]:
    """Media as a session event records them: kind, size and digest (never the bytes)."""
    return [
        {"kind": m.kind, "bytes": len(m.data), "sha256": hashlib.sha256(m.data).hexdigest()}
        for m in media
    ]
