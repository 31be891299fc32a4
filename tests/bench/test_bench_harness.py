"""The benchmark harness runs end to end in its tiny configuration and writes sound results.

Benchmarks are not tests: nothing here looks at a timing. This only keeps
``python -m bench`` from rotting: every scenario runs once (one repetition,
the tiny model; ``llama_cpp.server`` only when the ``[bench]`` extra is
installed) and the JSON and Markdown it writes are checked for shape.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # ``bench`` is a top-level package of the repository
    sys.path.insert(0, str(ROOT))

from bench import config  # noqa: E402
from bench.run import RunOptions, run  # noqa: E402
from bench.servers import llama_cpp_server_available  # noqa: E402
from jupyter_superfluid.engine.remote.build import llama_server_path  # noqa: E402


@pytest.mark.timeout(900)  # every scenario, a vLLM among them, one after another
def test_tiny_run_writes_json_and_markdown(tmp_path: Path) -> None:
    with_llama = llama_cpp_server_available()
    llama_server = llama_server_path()
    options = RunOptions(
        cfg=config.tiny(),
        scenarios=config.SCENARIOS,
        command="python -m bench --tiny",
        out_dir=tmp_path / "results",
        stem="tiny",
        llama_cpp_server=True,  # run() records it as skipped when the extra is missing
        # The C++ llama-server is compared when it is built (.ci/run builds it first).
        llama_server_binary=llama_server if llama_server.exists() else None,
        scratch=tmp_path,
    )
    json_path, md_path = run(options)
    assert (json_path.name, md_path.name) == ("tiny.json", "tiny.md")

    results = json.loads(json_path.read_text())
    assert {"date", "command", "machine", "load", "config", "model", "sections"} <= set(results)
    assert [s["id"] for s in results["sections"]] == list(config.SCENARIOS)
    for section in results["sections"]:
        assert section["rows"], section["id"]
        assert all(len(row) == len(section["columns"]) for row in section["rows"]), section["id"]
        for target in section["targets"]:
            assert target["met"] in (True, False, None)
    assert json_path.stat().st_size < 64_000  # small enough to commit

    text = md_path.read_text()
    assert text.startswith("# Benchmarks ")
    for section in results["sections"]:
        assert f"## {section['title']}" in text
    table_rows = [line for line in text.splitlines() if line.startswith("|")]
    assert table_rows and all(line.endswith("|") for line in table_rows)
    if not with_llama:
        assert any("llama_cpp.server" in s for s in results["skipped"])
    if llama_server.exists():  # superfluid over a remote llama-server ran, and was warm
        remote = next(s for s in results["sections"] if s["id"] == "remote")
        warm = [t for t in remote["targets"] if t["target"].startswith("continuations")]
        assert warm and all(t["met"] for t in warm), warm
    for section in results["sections"]:  # every scenario started a superfluid
        peaks = section["data"]["peak_rss_mib"]
        assert any(kind.startswith(("superfluid", "jupyter")) for kind in peaks), section["id"]
        assert any(note.startswith("Peak RSS: ") for note in section["notes"]), section["id"]


# A parent holding 40 MiB that starts a child holding 24 MiB, both alive until stdin closes.
PARENT = """
import subprocess, sys
held = bytearray(40 << 20)
child = subprocess.Popen([sys.executable, "-c",
    "import sys; held = bytearray(24 << 20); print('up', flush=True); sys.stdin.read()"],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE)
child.stdout.readline()
print("up", flush=True)
sys.stdin.read()
child.stdin.close(); child.wait()
"""


def test_peak_rss_is_told_per_server_and_its_children() -> None:
    import subprocess

    from bench import memory

    proc = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"up\n"
        memory.watch("superfluid-3", proc)
        sampler = memory.Sampler()
        sampler.sample()
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    peaks = sampler.peaks.to_json()
    assert peaks["superfluid"]["server"] >= 40 and peaks["superfluid"]["children"] >= 24
    assert sampler.peaks.line().startswith("Peak RSS: superfluid ")
    assert "MiB in its engine process)" in sampler.peaks.line()
    sampler.sample()  # the process has exited: it is no longer watched
    assert sampler.peaks.to_json() == peaks
