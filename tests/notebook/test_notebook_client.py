"""Server discovery for ``jupyter_superfluid.client()``: overrides, runtime files, JupyterHub."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import jupyter_superfluid
from jupyter_superfluid.notebook import client as discovery
from jupyter_superfluid.pytest_plugin import free_port

HUB_VARS = ("JUPYTERHUB_SERVICE_URL", "JUPYTERHUB_SERVICE_PREFIX", "JUPYTERHUB_API_TOKEN")


@pytest.fixture
def clean(monkeypatch, tmp_path):
    """No overrides, no hub, an empty runtime dir, nothing cached; not in a kernel."""
    for name in (discovery.ENV_BASE_URL, discovery.ENV_API_KEY, *HUB_VARS):
        monkeypatch.delenv(name, raising=False)
    runtime = tmp_path / "runtime"
    runtime.mkdir()
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(runtime))
    monkeypatch.setattr(discovery, "_connection_file", lambda: None)
    # Nothing may answer at the "default" address, whatever runs on this machine.
    monkeypatch.setattr(discovery, "STANDALONE_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")
    discovery.forget_server()
    yield runtime
    discovery.forget_server()


def in_kernel(monkeypatch, runtime: Path, kernel_id: str = "k-1") -> Path:
    """Pretend to be a kernel whose connection file is in ``runtime``."""
    conn = runtime / f"kernel-{kernel_id}.json"
    conn.write_text("{}")
    monkeypatch.setattr(discovery, "_connection_file", lambda: conn)
    return conn


def test_environment_overrides_and_arguments_override_it(clean, monkeypatch):
    monkeypatch.setenv(discovery.ENV_BASE_URL, "http://example.test:1/pre/v1/")
    monkeypatch.setenv(discovery.ENV_API_KEY, "sk-env")
    c = jupyter_superfluid.client()
    assert str(c.base_url) == "http://example.test:1/pre/v1/" and c.api_key == "sk-env"
    assert discovery.lmsp_base_url() == "http://example.test:1/pre/lmsp/v1"
    c = jupyter_superfluid.client(base_url="http://other.test/v1", api_key="sk-arg", max_retries=0)
    assert str(c.base_url) == "http://other.test/v1/" and c.api_key == "sk-arg"
    assert c.max_retries == 0
    a = jupyter_superfluid.async_client(api_key="sk-arg")
    assert str(a.base_url) == "http://example.test:1/pre/v1/" and a.api_key == "sk-arg"


def test_outside_a_kernel_the_standalone_default(clean):
    ep = discovery.find_server()
    assert ep.base_url == discovery.STANDALONE_BASE_URL and "not in a kernel" in ep.source
    assert ep.api_key == discovery.NO_KEY


def test_in_a_kernel_with_no_server_the_error_says_what_was_tried(clean, monkeypatch, standalone):
    in_kernel(monkeypatch, clean)
    # A live server file whose server does not know this kernel, and a stale one.
    (clean / "jpserver-1.json").write_text(
        json.dumps({"url": standalone.url + "/", "token": "t", "pid": os.getpid()})
    )
    (clean / "jpserver-2.json").write_text(
        json.dumps({"url": "http://127.0.0.1:9/", "token": "t", "pid": 2**22 + 7})
    )
    with pytest.raises(discovery.ServerNotFound) as info:
        discovery.find_server()
    message = str(info.value)
    assert f"the Jupyter server at {standalone.url}/ (HTTP 404)" in message
    assert "127.0.0.1:9" not in message  # the dead server's file is not tried
    assert f"the standalone default {discovery.STANDALONE_BASE_URL} (no answer)" in message
    assert "SUPERFLUID_BASE_URL" in message


def test_in_a_kernel_the_standalone_default_when_it_answers(clean, monkeypatch, standalone):
    in_kernel(monkeypatch, clean)
    monkeypatch.setattr(discovery, "STANDALONE_BASE_URL", standalone.base_url)
    assert discovery.find_server().source == "standalone default"


def test_jupyterhub_environment(clean, monkeypatch, standalone):
    in_kernel(monkeypatch, clean)
    port = standalone.url.rsplit(":", 1)[1]
    monkeypatch.setenv("JUPYTERHUB_SERVICE_URL", f"http://0.0.0.0:{port}/")
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/")
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "hub-token")
    ep = discovery.find_server()
    assert ep.base_url == f"http://127.0.0.1:{port}/v1" and ep.api_key == "hub-token"
    models = [m.id for m in jupyter_superfluid.client().models.list()]
    assert "superfluid/tiny-chatml" in models
    monkeypatch.setenv(discovery.ENV_API_KEY, "sk-env")  # a key alone keeps the discovered URL
    assert discovery.find_server().base_url == ep.base_url
    assert discovery.find_server().api_key == "sk-env"


def test_a_server_without_the_extension_is_named(standalone):
    with pytest.raises(discovery.ServerNotFound, match="extension enabled there"):
        discovery._checked(standalone.url + "/elsewhere/", "t", "the Jupyter server at X")


def test_kernel_id_from_the_connection_file_name():
    assert discovery._kernel_id(Path("/r/kernel-3f2a-11.json")) == "3f2a-11"
    assert discovery._kernel_id(Path("/r/other.json")) is None
