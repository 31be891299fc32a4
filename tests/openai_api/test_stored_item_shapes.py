"""Stored items are read back through the typed models, whatever extra fields a client sent."""

from __future__ import annotations

import httpx
import pytest

CHATML = "superfluid/tiny-chatml"
# Each part with another type's field (junk valued), and the text its preview starts with.
ODD_PARTS = [
    ({"type": "refusal", "refusal": "x", "text": 5}, "x →"),
    ({"type": "input_text", "text": "t", "refusal": 5}, "t →"),
    ({"type": "output_text", "text": "t", "annotations": 5}, "t →"),
]


@pytest.mark.parametrize(("part", "shown"), ODD_PARTS)
def test_extra_fields_of_a_part_are_stored_and_listed(standalone, part, shown):
    body = {
        "model": CHATML,
        "input": [{"role": "user", "content": [part]}],
        "store": True,
        "max_output_tokens": 2,
    }
    with httpx.Client(base_url=standalone.base_url, timeout=60) as http:
        made = http.post("/responses", json=body)
        assert made.status_code == 200, made.text
        rid = made.json()["id"]
        items = http.get(f"/responses/{rid}/input_items")
        assert items.status_code == 200, items.text
        (item,) = items.json()["data"]
        assert item["type"] == "message" and item["content"] == [part]
        listed = http.get("/responses", params={"limit": 100})
        assert listed.status_code == 200, listed.text
        (row,) = [r for r in listed.json()["data"] if r["id"] == rid]
        assert row["preview"].startswith(shown)
