"""Discovery: the service document and the models with their capabilities."""

from __future__ import annotations

import httpx

from .helpers import CHATML, QWEN, assert_problem, auth, request

MODEL_KEYS = {
    "id",
    "object",
    "capabilities",
    "context_window",
    "max_output_tokens",
    "state",
    "progress",
    "error",
}
CAPABILITIES = {
    "text",
    "streaming",
    "tools",
    "structured_output",
    "conversations",
    "reasoning",
    "tasks",
}


def test_service_document(url):
    doc = httpx.get(url).json()
    assert doc == httpx.get(url + "/").json()
    assert doc["object"] == "service" and doc["protocol"] == "lmsp"
    assert doc["protocol_versions"] == ["1.0"]
    assert doc["service"]["name"] == "jupyter_superfluid" and doc["service"]["version"]
    assert set(doc["capabilities"]) == CAPABILITIES and doc["extensions"] == ["superfluid"]
    assert doc["links"] == {
        "self": "/lmsp/v1",
        "models": "/lmsp/v1/models",
        "responses": "/lmsp/v1/responses",
        "tasks": "/lmsp/v1/tasks",
    }


def test_models_carry_capabilities_from_their_templates(url):
    httpx.post(f"{url}/responses", json=request(max_output_tokens=1), timeout=60)
    listing = httpx.get(f"{url}/models").json()
    assert listing["object"] == "list"
    models = {m["id"]: m for m in listing["data"]}
    assert list(models) == [CHATML, QWEN]
    for model_id, model in models.items():
        assert set(model) == MODEL_KEYS and model["object"] == "model"
        assert set(model["capabilities"]) == CAPABILITIES
        assert model["context_window"] == 2048 and model["max_output_tokens"] == 2048
        assert httpx.get(f"{url}/models/{model_id}").json() == model
    chatml, qwen = models[CHATML]["capabilities"], models[QWEN]["capabilities"]
    # tiny-chatml's plain ChatML calls tools in the generic format; it has no thinking switch.
    assert (chatml["tools"], chatml["reasoning"]) == (True, False)  # the generic tool format
    assert (qwen["tools"], qwen["reasoning"]) == (True, True)
    for caps in (chatml, qwen):
        assert all(caps[c] for c in ("text", "streaming", "structured_output", "tasks"))
    assert models[CHATML]["state"] == "loaded"
    assert models[CHATML]["progress"] is None and models[CHATML]["error"] is None
    assert_problem(httpx.get(f"{url}/models/nope"), 404, "model_not_found", "model_id")


def test_a_model_not_loaded_is_described_from_its_file(keyed):
    # Nothing on this server ever uses tiny-qwen3, and it does not preload.
    model = httpx.get(f"{keyed}/models/{QWEN}", headers=auth("sk-full")).json()
    assert model["state"] == "available"  # on disk (a built-in), not loaded
    assert model["capabilities"]["tools"] is True and model["capabilities"]["reasoning"] is True
    assert model["context_window"] == 2048


def test_discovery_and_v1_models_agree_from_the_start(sf_start_standalone):
    # From the server's first answer on, while the first model preloads, discovery
    # gives the state /v1/models gives (read just before or just after it); /v1/models
    # says loaded exactly when its state is.
    server = sf_start_standalone()  # preloads the first model, tiny-chatml

    def openai_side() -> tuple[str, bool]:
        status = httpx.get(f"{server.base_url}/models/{CHATML}", timeout=30).json()["superfluid"]
        assert status["loaded"] == (status["state"] == "loaded"), status
        return status["state"], status["loaded"]

    seen = []
    loaded = False
    while not loaded:
        before, _ = openai_side()
        lmsp = httpx.get(f"{server.url}/lmsp/v1/models/{CHATML}", timeout=30).json()
        after, loaded = openai_side()
        assert lmsp["state"] in (before, after), (before, lmsp["state"], after)
        seen.append(lmsp["state"])
    assert set(seen) <= {"available", "loading", "loaded"}
    listed = httpx.get(f"{server.url}/lmsp/v1/models", timeout=30).json()["data"]
    assert [m["state"] for m in listed] == ["loaded", "available"]  # tiny-qwen3: on use
