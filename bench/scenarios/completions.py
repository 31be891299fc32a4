"""Scenario 10, as-you-type completions: TTFT of a fill-in-the-middle completion per keystroke.

A notebook of about 2k tokens of earlier cells, then the current cell with the cursor
in its middle; each completion is 16 tokens (end of text banned), as the JupyterLab
provider asks for them: the earlier cells and the cell up to the cursor as ``prompt``,
the rest of the cell as ``suffix``.

- **Cold**: the request on a freshly started superfluid (nothing cached): the baseline.
- **As you type**: on one server, the user types one more character before each
  request, so each prompt extends the last one's prefix by a character.
- The same keystrokes against llama.cpp's C++ ``llama-server`` ``/infill``
  (``input_prefix``/``input_suffix``, ``cache_prompt``), cold (fresh server) and as
  you type, side by side in the same run.

Target: as-you-type TTFT at most 0.2 x the cold request's.
"""

from __future__ import annotations

from typing import Any

from bench.client import StreamResult, completion_text, infill_text, stream_text
from bench.context import Context
from bench.model import MODEL_ID, eos_logit_bias
from bench.scenarios.common import Section, ratio_of, spread, times, ttft_summary
from bench.servers import Server

CONTEXT_TOKENS = 2000
OUTPUT_TOKENS = 16
SUFFIX = "\n    return total\n"


def notebook(ctx: Context, tokens: int) -> str:
    """Earlier cells of deterministic Python, about ``tokens`` tokens long."""
    cells: list[str] = []
    i = 0
    while ctx.tokenizer.count("\n\n".join(cells)) < tokens:
        cells.append(f"def step_{i}(values):\n    return [v * {i} + {i % 7} for v in values]")
        i += 1
    return "\n\n".join(cells) + "\n\n"


def keystrokes(ctx: Context, n: int) -> list[str]:
    """The cell's text up to the cursor, one character longer each time."""
    start = "def total_of(values):\n    total = 0\n    for v in values:\n        total += step_"
    return [start + "0123456789abcdef"[: i + 1] for i in range(n)]


def _sf_body(prefix: str, typed: str) -> dict[str, Any]:
    return {
        "model": MODEL_ID,
        "prompt": prefix + typed,
        "suffix": SUFFIX,
        "max_tokens": OUTPUT_TOKENS,
        "temperature": 0,
        "logit_bias": eos_logit_bias(-100),
    }


def _infill_body(prefix: str, typed: str) -> dict[str, Any]:
    return {
        "input_prefix": prefix + typed,
        "input_suffix": SUFFIX,
        "n_predict": OUTPUT_TOKENS,
        "temperature": 0,
        "cache_prompt": True,
        "logit_bias": [[int(k), False] for k in eos_logit_bias(-100)],
    }


async def _typing(ctx: Context, server: Server, prefix: str, kind: str) -> list[StreamResult]:
    """One warm-up request, then one request per keystroke (the measured ones)."""
    typed = keystrokes(ctx, ctx.cfg.reps + 1)
    out = []
    async with ctx.http() as http:
        for text in typed:
            out.append(await _request(http, server, prefix, text, kind))
    return out[1:]


async def _request(http: Any, server: Server, prefix: str, typed: str, kind: str) -> StreamResult:
    if kind == "superfluid":
        url, body, text_of = (
            server.url + "/v1/completions",
            _sf_body(prefix, typed),
            completion_text,
        )
    else:
        url, body, text_of = server.url + "/infill", _infill_body(prefix, typed), infill_text
    return await stream_text(http, url, body, text_of, headers=server.headers)


async def _cold(ctx: Context, prefix: str, kind: str) -> list[StreamResult]:
    """The first keystroke's request, each on a freshly started server."""
    out = []
    for _ in range(ctx.cfg.cold_reps):
        server = await (ctx.superfluid() if kind == "superfluid" else ctx.llama_server(1))
        if server is None:
            return []
        try:
            async with ctx.http() as http:
                out.append(await _request(http, server, prefix, keystrokes(ctx, 1)[0], kind))
        finally:
            server.stop()
    return out


async def _series(ctx: Context, prefix: str, kind: str) -> dict[str, Any] | None:
    """Cold and as-you-type TTFT summaries of one server kind (None when not compared)."""
    cold = await _cold(ctx, prefix, kind)
    if not cold:
        return None
    server = await (ctx.superfluid() if kind == "superfluid" else ctx.llama_server(1))
    assert server is not None
    try:
        typing = await _typing(ctx, server, prefix, kind)
    finally:
        server.stop()
    return {
        "cold": ttft_summary(cold),
        "typing": ttft_summary(typing),
        "cached": [r.warm_header for r in typing],
    }


async def run(ctx: Context) -> Section:
    """Measure both servers and build the section."""
    tokens = min(CONTEXT_TOKENS, ctx.cfg.histories[-1])
    prefix = notebook(ctx, tokens)
    section = Section(
        id="completions",
        title=f"As-you-type completions: {OUTPUT_TOKENS}-token FIM after ~{tokens} tokens of cells",
        baseline="the same request cold (a freshly started server)",
        columns=["server", "cold TTFT", "as-you-type TTFT", "typing / cold"],
    )
    found: dict[str, dict[str, Any] | None] = {}
    for kind in ("superfluid", "llama-server"):
        ctx.log(f"completions: {kind}")
        found[kind] = series = await _series(ctx, prefix, kind)
        if series is None:
            section.notes.append(f"{kind}: not compared (pass --with-llama-server)")
            continue
        ratio = ratio_of(series["typing"], series["cold"])
        name = "superfluid /v1/completions" if kind == "superfluid" else "llama-server /infill"
        section.rows.append([name, spread(series["cold"]), spread(series["typing"]), times(ratio)])
        series["ratio"] = ratio
    section.data = {"prompt_tokens": ctx.tokenizer.count(prefix), **found}
    sf = found.get("superfluid")
    ratio = sf["ratio"] if sf else None
    met = None if ratio is None else ratio <= 0.2
    section.target("as-you-type TTFT <= 0.2 x cold", times(ratio), met)
    return section
