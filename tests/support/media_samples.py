"""Small media files made in memory (no extra dependencies): a PNG and a WAV."""

from __future__ import annotations

import base64
import io
import struct
import wave
import zlib

import numpy as np


def png(width: int, height: int, seed: int) -> bytes:
    """A random RGB PNG, written by hand (zlib + struct)."""
    rgb = np.random.default_rng(seed).integers(0, 256, (height, width * 3), dtype=np.uint8)
    raw = b"".join(b"\x00" + row.tobytes() for row in rgb)

    def chunk(tag: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(tag + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def wav(seconds: float, hz: float, rate: int = 16000) -> bytes:
    """A mono 16-bit PCM sine-wave WAV."""
    t = np.arange(int(seconds * rate)) / rate
    samples = (np.sin(2 * np.pi * hz * t) * 12000).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())
    return out.getvalue()


def b64(data: bytes) -> str:
    """Base64 text of ``data``."""
    return base64.b64encode(data).decode()


def data_url(data: bytes, mime: str = "image/png") -> str:
    """A base64 ``data:`` URL."""
    return f"data:{mime};base64,{b64(data)}"
