"""The standalone server as a user runs it: commands, logs, shutdown, keys, offline default."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
from support.no_eos import RUN_TO_CAP

from jupyter_superfluid.pytest_plugin import free_port, wait_ready


def test_sigint_shuts_down_cleanly(sf_start_standalone):
    server = sf_start_standalone()
    assert httpx.get(server.base_url + "/models").status_code == 200
    assert server.stop(signal.SIGINT) == 0
    log = server.log()
    assert f"listening on {server.url}/v1" in log
    assert "superfluid/tiny-chatml" in log and "stopped" in log


def test_jupyter_superfluid_serve_command(sf_model_cache: Path, tmp_path: Path):
    jupyter = Path(sys.executable).with_name("jupyter")
    port = free_port()
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                str(jupyter),
                "superfluid",
                "serve",
                f"--port={port}",
                f"--sessions-dir={tmp_path / 's'}",
                f"--model-cache-dir={sf_model_cache}",
                "--model=superfluid/tiny-chatml",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc, log_path)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x")
        assert [m.id for m in client.models.list()] == ["superfluid/tiny-chatml"]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def test_api_key_required_when_configured(sf_start_standalone):
    server = sf_start_standalone("--api-key=sk-one")
    assert httpx.get(server.base_url + "/models").status_code == 401
    body = httpx.get(
        server.base_url + "/models", headers={"Authorization": "Bearer sk-wrong"}
    ).json()
    assert body["error"]["code"] == "invalid_api_key"
    ok = openai.OpenAI(base_url=server.base_url, api_key="sk-one")
    assert len(ok.models.list().data) == 2


def test_refuses_a_public_address_without_keys(sf_model_cache: Path, tmp_path: Path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_superfluid",
            "serve",
            "--host=0.0.0.0",
            f"--port={free_port()}",
            f"--sessions-dir={tmp_path}",
            f"--model-cache-dir={sf_model_cache}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "--api-key" in out.stderr + out.stdout


def test_port_in_use_is_a_clear_error(standalone, sf_model_cache: Path, tmp_path: Path):
    port = standalone.url.rsplit(":", 1)[1]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter_superfluid",
            "serve",
            f"--port={port}",
            f"--sessions-dir={tmp_path}",
            f"--model-cache-dir={sf_model_cache}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "port in use" in out.stderr + out.stdout


@pytest.fixture
def offline(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    yield


def test_default_models_offline_answer_503_naming_the_tiny_model(offline, sf_start_standalone):
    server = sf_start_standalone(models=())
    ids = [m["id"] for m in httpx.get(server.base_url + "/models").json()["data"]]
    assert ids[0].startswith("Qwen3-0.6B") and "superfluid/tiny-qwen3" in ids
    r = httpx.post(
        server.base_url + "/chat/completions",
        timeout=60,
        json={"model": ids[0], "messages": [{"role": "user", "content": "hi"}]},
    )
    assert r.status_code == 503
    err = r.json()["error"]
    assert err["code"] == "model_unavailable" and "superfluid/tiny-qwen3" in err["message"]
    tiny = httpx.post(
        server.base_url + "/chat/completions",
        timeout=60,
        json={
            "model": "superfluid/tiny-qwen3",
            "max_tokens": 3,
            "messages": [{"role": "user", "content": "hi"}],
        },
    )
    assert tiny.status_code == 200


def test_cached_hub_model_serves_offline(
    offline, sf_model_cache: Path, sf_start_standalone, tmp_path: Path
):
    from jupyter_superfluid.builtin_models.tiny_gguf import ensure_builtin

    snapshot = (
        Path(os.environ["HF_HOME"])
        / "hub"
        / "models--acme--tiny-GGUF"
        / "snapshots"
        / "0123456789abcdef0123456789abcdef01234567"
    )
    snapshot.mkdir(parents=True)
    (snapshot / "tiny.gguf").write_bytes(
        ensure_builtin("superfluid/tiny-chatml", sf_model_cache).read_bytes()
    )
    refs = snapshot.parent.parent / "refs"
    refs.mkdir()
    (refs / "main").write_text("0123456789abcdef0123456789abcdef01234567")
    server = sf_start_standalone(models=("hf:acme/tiny-GGUF/tiny.gguf",))
    client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    out = client.chat.completions.create(
        model="tiny",
        max_tokens=3,
        messages=[{"role": "user", "content": "hi"}],
        extra_body=RUN_TO_CAP,
    )
    assert out.choices[0].finish_reason == "length" and out.usage.completion_tokens == 3


def test_unloadable_model_names_the_file(sf_start_standalone, tmp_path: Path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"not a gguf at all")
    server = sf_start_standalone(models=(str(bad),))
    r = httpx.post(
        server.base_url + "/chat/completions",
        timeout=60,
        json={"model": "broken", "messages": [{"role": "user", "content": "x"}]},
    )
    assert r.status_code == 503
    assert "broken.gguf" in r.json()["error"]["message"]
