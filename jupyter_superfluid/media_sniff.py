"""What kind of medium some bytes are, from their magic numbers, without llama.cpp.

The chat path checks a request's media with it before they reach any engine, and the
engine checks again before its decoder sees them (so arbitrary data never reaches
mtmd's video fallback).
"""

from __future__ import annotations

from typing import Literal

MediaKind = Literal["image", "audio"]

_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"GIF87a", b"GIF89a", b"BM")


def sniff_media(data: bytes) -> MediaKind | None:
    """``"image"`` or ``"audio"`` from a file's magic bytes (as mtmd's helper decides), or None."""
    is_mp3_sync = len(data) >= 2 and data[0] == 0xFF and (data[1] & 0xE0) == 0xE0
    if len(data) >= 12 and (
        (data[:4] == b"RIFF" and data[8:12] == b"WAVE")
        or data[:3] == b"ID3"
        or data[:4] == b"fLaC"
        or is_mp3_sync
    ):
        return "audio"
    if data.startswith(_IMAGE_MAGIC):
        return "image"
    return None
