"""Files as chat input: an ``input_file`` part's text, inlined into its message.

A part gives the file as ``file_data`` (base64, or a ``data:`` URL) with a
``filename``. Text-like files (text, markdown, CSV/TSV, JSON, YAML, XML, HTML
and source code: decided by the filename's extension, or the ``data:`` URL's
media type, and the bytes being valid UTF-8) are decoded; a PDF (``.pdf`` or
``application/pdf``) has its text extracted with ``pypdf``. The message gets
the file where the part was, rendered exactly as::

    File: notes.md
    ```
    <the file's text>
    ```

(the fence grows past the longest run of backticks in the text, so the text
cannot close it). Limits: ``MAX_FILE_BYTES`` of decoded file, ``MAX_FILE_CHARS``
of text; over either is a 400 naming the part and the limit. Any other type
(images, archives, office documents, binary data) is a 400 ``unsupported_input``
naming the part; ``file_id`` and ``file_url`` are ``unsupported_parameter``.
"""

from __future__ import annotations

import io
import re
from pathlib import PurePosixPath

from jupyter_superfluid.errors import InvalidRequest, UnsupportedParameter
from jupyter_superfluid.generation.media import decode_base64, decode_data_url
from jupyter_superfluid.generation.wire import FilePart

MAX_FILE_BYTES = 8 << 20  # of one decoded file
MAX_FILE_CHARS = 200_000  # of the text one file contributes
TEXT_EXTENSIONS = frozenset(
    [
        "txt",
        "text",
        "md",
        "markdown",
        "rst",
        "csv",
        "tsv",
        "json",
        "jsonl",
        "ndjson",
        "yaml",
        "yml",
        "toml",
        "ini",
        "cfg",
        "conf",
        "xml",
        "html",
        "htm",
        "css",
        "log",
        "tex",
        "sql",
        "sh",
        "bash",
        "zsh",
        "py",
        "pyi",
        "ipynb",
        "js",
        "mjs",
        "cjs",
        "jsx",
        "ts",
        "tsx",
        "java",
        "kt",
        "scala",
        "c",
        "h",
        "cc",
        "cpp",
        "cxx",
        "hpp",
        "cs",
        "go",
        "rs",
        "rb",
        "php",
        "pl",
        "lua",
        "r",
        "jl",
        "swift",
        "m",
        "mm",
        "dart",
        "hs",
        "ml",
        "ex",
        "exs",
        "erl",
        "clj",
        "vue",
        "svelte",
    ]
)
TEXT_MEDIA_TYPES = frozenset(
    {
        "application/json",
        "application/x-ndjson",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/x-python",
        "application/x-sh",
        "application/sql",
    }
)
PDF = "application/pdf"
_BACKTICKS = re.compile(r"`{3,}")


def file_part_text(part: FilePart, param: str) -> str:
    """An ``input_file`` part rendered as text for its message, or a 400 naming ``param``."""
    if part.file_id is not None or part.file_url is not None:
        field = "file_id" if part.file_id is not None else "file_url"
        raise UnsupportedParameter(
            f"{param}: input_file by {field} is not supported; send file_data and a filename",
            param=f"{param}.{field}",
        )
    if part.file_data is None:
        raise InvalidRequest(f"{param}: input_file needs file_data", param=f"{param}.file_data")
    name = part.filename or "file"
    data, media_type = _decoded(part.file_data, f"{param}.file_data")
    if len(data) > MAX_FILE_BYTES:
        raise InvalidRequest(
            f"{param}: the file {name!r} is {len(data)} bytes, over the limit of "
            f"{MAX_FILE_BYTES} bytes per input file (max file bytes)",
            param=param,
            code="file_too_large",
        )
    text = _text_of(data, name, media_type, param)
    if len(text) > MAX_FILE_CHARS:
        raise InvalidRequest(
            f"{param}: the text of {name!r} is {len(text)} characters, over the limit of "
            f"{MAX_FILE_CHARS} characters per input file (max file text characters)",
            param=param,
            code="file_too_large",
        )
    return render_file(name, text)


def render_file(name: str, text: str) -> str:
    """``File: name`` and the text in a fence longer than any backtick run inside it."""
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=2)
    fence = "`" * (longest + 1)
    return f"File: {name}\n{fence}\n{text}\n{fence}"


def _decoded(file_data: str, param: str) -> tuple[bytes, str | None]:
    """The bytes of ``file_data`` and the media type its ``data:`` URL names, if any."""
    if not file_data.startswith("data:"):
        return decode_base64(file_data, param), None
    header = file_data[5:].partition(",")[0]
    media_type = header.split(";", 1)[0].strip().lower() or None
    return decode_data_url(file_data, param), media_type


def _text_of(data: bytes, name: str, media_type: str | None, param: str) -> str:
    suffix = PurePosixPath(name).suffix.lower().lstrip(".")
    if suffix == "pdf" or media_type == PDF:
        return _pdf_text(data, name, param)
    texty = suffix in TEXT_EXTENSIONS or (
        media_type is not None
        and (media_type.startswith("text/") or media_type in TEXT_MEDIA_TYPES)
    )
    if texty and b"\x00" not in data:
        try:
            return data.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError:
            pass
    kind = media_type or (f".{suffix}" if suffix else "no extension")
    raise InvalidRequest(
        f"{param}: input file {name!r} ({kind}) is not supported: only text-like files "
        "(text, markdown, CSV, JSON, source code; valid UTF-8) and PDFs are read",
        param=param,
        code="unsupported_input",
    )


def _pdf_text(data: bytes, name: str, param: str) -> str:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except Exception as err:  # an untrusted file in a third-party parser: never a 500
        raise InvalidRequest(
            f"{param}: {name!r} is not a readable PDF: {err}", param=param, code="invalid_file"
        ) from err
    return "\n\n".join(p.strip() for p in pages).strip()
