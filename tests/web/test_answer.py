"""``ProtocolHandler.answer``: a body as JSON or batches as SSE, ``x-superfluid-warm`` on both."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

from tornado.testing import AsyncHTTPTestCase
from tornado.web import Application

from jupyter_superfluid.errors import APIError
from jupyter_superfluid.web.answer import WARM_HEADER, Answer
from jupyter_superfluid.web.auth import KeyRing
from jupyter_superfluid.web.base import Access, ProtocolHandler
from jupyter_superfluid.web.sse import SSE


async def batches(fail: bool = False) -> AsyncGenerator[list[SSE], None]:
    yield [SSE.json({"n": 1}, event="one", id=1), SSE.json({"n": 2}, event="two", id=2)]
    if fail:
        await asyncio.sleep(0.01)  # the first batch is flushed: the headers are out
        raise APIError("boom", status=500, code="generation_failed")
    yield [SSE("[DONE]")]


def ended(err: APIError) -> list[SSE]:
    return [SSE.json({"error": err.code}, event="error")]


class AnswerHandler(ProtocolHandler):
    def initialize(self, access: Access) -> None:
        self.access = access

    async def get(self, kind: str) -> None:
        reads: list[int] = []

        def warm() -> int:
            reads.append(1)
            return 7 * len(reads)  # read once: 7

        answers: dict[str, Any] = {
            "body": Answer(body={"ok": True}, warm=warm, status=201),
            "cold": Answer(body={"ok": True}),
            "stream": Answer(batches=batches(), warm=warm),
            "failed": Answer(batches=batches(fail=True), warm=warm, on_error=ended),
            "follow": Answer(batches=batches(), headers_first=True),
        }
        await self.answer(answers[kind])


class TestAnswer(AsyncHTTPTestCase):
    def get_app(self) -> Application:
        access = Access(KeyRing(), max_request_bytes=1 << 20)
        return Application([(r"/(\w+)", AnswerHandler, {"access": access})])

    def test_a_body_is_json_with_its_warm_header(self) -> None:
        r = self.fetch("/body")
        assert (r.code, json.loads(r.body), r.headers[WARM_HEADER]) == (201, {"ok": True}, "7")
        assert r.headers["Content-Type"] == "application/json"
        assert WARM_HEADER not in self.fetch("/cold").headers

    def test_batches_are_sse_with_the_warm_header_read_once(self) -> None:
        r = self.fetch("/stream")
        assert r.headers["Content-Type"].startswith("text/event-stream")
        assert r.headers[WARM_HEADER] == "7"
        text = r.body.decode()
        assert text == (
            'id: 1\nevent: one\ndata: {"n": 1}\n\nid: 2\nevent: two\ndata: {"n": 2}\n\n'
            "data: [DONE]\n\n"
        )

    def test_an_error_after_the_first_event_ends_the_stream_with_on_error(self) -> None:
        r = self.fetch("/failed")
        assert r.code == 200 and r.headers[WARM_HEADER] == "7"
        assert r.body.decode().endswith('event: error\ndata: {"error": "generation_failed"}\n\n')

    def test_a_follower_stream_has_no_warm_header(self) -> None:
        r = self.fetch("/follow")
        assert WARM_HEADER not in r.headers and r.body.decode().endswith("data: [DONE]\n\n")
