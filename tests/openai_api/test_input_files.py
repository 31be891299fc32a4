"""``input_file`` parts: text-like files and PDFs inlined as text, others refused, limits told.

What the prompt holds is checked through token counts: a message with the file
counts exactly as the same message with the documented rendering as text
(``File: name``, then the text in a fence), and creating it reports that count.
"""

from __future__ import annotations

import base64

import httpx
import openai
import pytest
from pypdf import PdfReader
from support.openresponses_schema import errors_of

CHATML = "superfluid/tiny-chatml"
MARKDOWN = "# Notes\n\nSome *markdown* with a fence:\n\n```py\nx = 1\n```\n"
CSV = "city,temp\nParis,21\nOslo,9\n"
PYTHON = 'def greet(name: str) -> str:\n    return f"hi {name}"\n'
PDF_TEXT = "Hello from a PDF"


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF showing ``text`` in Helvetica, built by hand (offsets computed)."""
    stream = f"BT /F1 24 Tf 72 700 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (n, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def with_file(part: dict) -> list[dict]:
    content = [{"type": "input_text", "text": "Read this.\n"}, {"type": "input_file", **part}]
    return [{"type": "message", "role": "user", "content": content}]


def as_text(rendered: str) -> list[dict]:
    content = [{"type": "input_text", "text": "Read this.\n" + rendered}]
    return [{"type": "message", "role": "user", "content": content}]


def count(client: openai.OpenAI, items: list[dict]) -> int:
    return client.responses.input_tokens.count(model=CHATML, input=items).input_tokens


@pytest.mark.parametrize(
    ("filename", "text", "fence"),
    [("notes.md", MARKDOWN, "````"), ("data.csv", CSV, "```"), ("greet.py", PYTHON, "```")],
)
def test_text_files_are_inlined_with_their_name(openai_client, filename, text, fence):
    part = {"filename": filename, "file_data": b64(text.encode())}
    rendered = f"File: {filename}\n{fence}\n{text}\n{fence}"
    n = count(openai_client, with_file(part))
    assert n == count(openai_client, as_text(rendered))
    assert n > count(openai_client, as_text(""))
    made = openai_client.responses.create(model=CHATML, input=with_file(part), max_output_tokens=1)
    assert made.usage.input_tokens == n
    items = openai_client.responses.input_items.list(made.id)
    stored = items.data[0].content[1]
    assert (stored.type, stored.filename, stored.file_data) == (
        "input_file",
        filename,
        part["file_data"],
    )


def test_a_data_url_names_the_media_type(openai_client):
    part = {"filename": "export", "file_data": "data:text/csv;base64," + b64(CSV.encode())}
    assert count(openai_client, with_file(part)) == count(
        openai_client, as_text(f"File: export\n```\n{CSV}\n```")
    )


def test_pdf_text_is_extracted(openai_client, tmp_path):
    pdf = tiny_pdf(PDF_TEXT)
    (tmp_path / "doc.pdf").write_bytes(pdf)
    assert PdfReader(tmp_path / "doc.pdf").pages[0].extract_text() == PDF_TEXT
    part = {"filename": "doc.pdf", "file_data": "data:application/pdf;base64," + b64(pdf)}
    assert count(openai_client, with_file(part)) == count(
        openai_client, as_text(f"File: doc.pdf\n```\n{PDF_TEXT}\n```")
    )


@pytest.mark.parametrize(
    "part",
    [
        {"filename": "notes.md", "file_data": b64(MARKDOWN.encode())},
        {"filename": "doc.pdf", "file_data": "data:application/pdf;base64," + b64(b"%PDF-")},
    ],
)
def test_the_parts_sent_are_openresponses_request_bodies(part):
    body = {"model": CHATML, "input": with_file(part)}
    assert errors_of("CreateResponseBody", body) == []


def post_file(standalone, part: dict) -> httpx.Response:
    body = {"model": CHATML, "input": with_file(part), "max_output_tokens": 1}
    return httpx.post(standalone.base_url + "/responses", json=body, timeout=120)


@pytest.mark.parametrize(
    ("size", "limit"),
    [
        (8 * 1024 * 1024 + 1, "over the limit of 8388608 bytes per input file"),
        (200_001, "over the limit of 200000 characters per input file"),
    ],
)
def test_an_oversized_file_names_the_limit(standalone, size, limit):
    r = post_file(standalone, {"filename": "big.txt", "file_data": b64(b"a" * size)})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert (err["code"], err["param"]) == ("file_too_large", "input[0].content[1]")
    assert limit in err["message"] and "big.txt" in err["message"]


@pytest.mark.parametrize(
    ("part", "kind"),
    [
        ({"filename": "blob.bin", "file_data": b64(bytes(range(256)))}, ".bin"),
        ({"filename": "photo.png", "file_data": b64(b"\x89PNG\r\n\x1a\n" + bytes(64))}, ".png"),
        ({"filename": "latin1.txt", "file_data": b64("café".encode("latin-1"))}, ".txt"),
        (
            {"filename": "x", "file_data": "data:application/zip;base64," + b64(b"PK\x03\x04")},
            "zip",
        ),
    ],
)
def test_binary_files_are_unsupported_input(standalone, part, kind):
    r = post_file(standalone, part)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert (err["code"], err["param"]) == ("unsupported_input", "input[0].content[1]")
    assert part["filename"] in err["message"] and kind in err["message"]


@pytest.mark.parametrize(
    ("part", "status", "code", "param"),
    [
        ({"file_id": "file-1"}, 400, "unsupported_parameter", "input[0].content[1].file_id"),
        (
            {"file_url": "https://x/y.md"},
            400,
            "unsupported_parameter",
            "input[0].content[1].file_url",
        ),
        ({"filename": "a.md"}, 400, "invalid_request", "input[0].content[1].file_data"),
        (
            {"filename": "a.md", "file_data": "@@"},
            400,
            "invalid_request",
            "input[0].content[1].file_data",
        ),
        (
            {"filename": "a.pdf", "file_data": b64(b"%PDF-1.4 junk")},
            400,
            "invalid_file",
            "input[0].content[1]",
        ),
    ],
)
def test_file_part_errors_name_the_field(standalone, part, status, code, param):
    r = post_file(standalone, part)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert (err["code"], err["param"]) == (code, param), err
