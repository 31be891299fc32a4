"""ModelRegistry: specs, built-ins, lazy loading, and the Hugging Face cache offline."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from jupyter_superfluid.engine.base import ModelLoadError
from jupyter_superfluid.engine.local.llama import LlamaEngine
from jupyter_superfluid.models.registry import (
    DEFAULT_MODELS,
    ModelNotFoundError,
    ModelRegistry,
    ModelUnavailableError,
    parse_spec,
)

QWEN_SPEC = "hf:unsloth/Qwen3-0.6B-GGUF/Qwen3-0.6B-Q4_K_M.gguf"


@pytest.fixture
def hf_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face home, offline."""
    home = tmp_path / "hf"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


def test_parse_specs(tmp_path: Path) -> None:
    assert parse_spec("/models/My-Model.Q4.gguf").id == "My-Model.Q4"
    spec = parse_spec("mine=/models/x.gguf")
    assert (spec.id, spec.kind, spec.source) == ("mine", "path", "/models/x.gguf")
    spec = parse_spec(QWEN_SPEC)
    assert (spec.id, spec.kind) == ("Qwen3-0.6B-Q4_K_M", "hf")
    assert spec.hf_repo_file == ("unsloth/Qwen3-0.6B-GGUF", "Qwen3-0.6B-Q4_K_M.gguf")
    assert parse_spec("superfluid/tiny-qwen3").kind == "builtin"
    with pytest.raises(ValueError, match="built-in"):
        parse_spec("superfluid/tiny-llama")
    with pytest.raises(ValueError, match=r"hf:OWNER/REPO/FILE\.gguf"):
        parse_spec("hf:just-a-repo")


def test_default_models() -> None:
    registry = ModelRegistry()
    assert registry.ids() == [
        "Qwen3-0.6B-Q4_K_M",
        "superfluid/tiny-qwen3",
        "superfluid/tiny-chatml",
    ]
    assert DEFAULT_MODELS[0] == QWEN_SPEC
    assert registry.spec(QWEN_SPEC).id == "Qwen3-0.6B-Q4_K_M"  # the spec works as an alias


def test_unknown_id() -> None:
    registry = ModelRegistry(["superfluid/tiny-chatml"])
    with pytest.raises(ModelNotFoundError, match="nope"):
        asyncio.run(registry.get("nope"))


def test_builtin_loads_lazily_once(tmp_path: Path) -> None:
    registry = ModelRegistry(["superfluid/tiny-chatml"], cache_dir=tmp_path, context_size=512)

    async def scenario() -> list:
        assert registry.loaded("superfluid/tiny-chatml") is None
        engines = await asyncio.gather(*(registry.get("superfluid/tiny-chatml") for _ in range(3)))
        await registry.close()
        return engines

    engines = asyncio.run(scenario())
    assert engines[0] is engines[1] is engines[2]
    assert isinstance(engines[0], LlamaEngine)
    assert engines[0].info.id == "superfluid/tiny-chatml"
    assert engines[0].info.context_size == 512
    assert len(list(tmp_path.glob("*.gguf"))) == 1


def test_path_spec_and_load_errors(tmp_path: Path, sf_models: dict[str, Path]) -> None:
    model = tmp_path / "copy.gguf"
    shutil.copy(sf_models["superfluid/tiny-qwen3"], model)
    registry = ModelRegistry([str(model), f"broken={tmp_path / 'missing.gguf'}"])

    async def scenario() -> None:
        engine = await registry.get("copy")
        assert engine.info.chat_template and "enable_thinking" in engine.info.chat_template
        with pytest.raises(ModelLoadError, match=r"missing\.gguf"):
            await registry.get("broken")
        await registry.close()

    asyncio.run(scenario())


@pytest.mark.timeout(60)  # fast: no retries (a hang guard, not a measure of speed)
def test_offline_hf_spec_with_nothing_cached_fails_fast(hf_home: Path) -> None:
    registry = ModelRegistry([QWEN_SPEC])
    with pytest.raises(ModelUnavailableError, match="--model superfluid/tiny-qwen3"):
        asyncio.run(registry.get("Qwen3-0.6B-Q4_K_M"))


@pytest.mark.timeout(60)  # fast: no retries with backoff (a hang guard, not a measure)
def test_unreachable_hub_fails_fast(hf_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    registry = ModelRegistry([QWEN_SPEC])
    with pytest.raises(ModelUnavailableError, match=r"cannot reach.*--model superfluid/tiny-qwen3"):
        asyncio.run(registry.get("Qwen3-0.6B-Q4_K_M"))


def test_cached_hf_file_works_offline(hf_home: Path, sf_models: dict[str, Path]) -> None:
    # huggingface_hub's cache layout, written by hand.
    repo = hf_home / "hub" / "models--unsloth--Qwen3-0.6B-GGUF"
    revision = "0123456789abcdef0123456789abcdef01234567"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    shutil.copy(sf_models["superfluid/tiny-qwen3"], snapshot / "Qwen3-0.6B-Q4_K_M.gguf")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    registry = ModelRegistry([QWEN_SPEC])
    assert registry.resolve("Qwen3-0.6B-Q4_K_M") == snapshot / "Qwen3-0.6B-Q4_K_M.gguf"

    async def scenario() -> str:
        engine = await registry.get("Qwen3-0.6B-Q4_K_M")
        await registry.close()
        return engine.info.id

    assert asyncio.run(scenario()) == "Qwen3-0.6B-Q4_K_M"


def test_a_model_spec_can_name_its_projector(tmp_path: Path, sf_models: dict[str, Path]) -> None:
    from jupyter_superfluid.builtin_models.tiny_mmproj import build_mmproj

    model = shutil.copy(sf_models["superfluid/tiny-chatml"], tmp_path / "m.gguf")
    projector = build_mmproj(tmp_path / "p.gguf", text_n_embd=64, kind="vision")
    spec = parse_spec(f"eyes={model};mmproj={projector}")
    assert (spec.id, spec.kind, spec.mmproj) == ("eyes", "path", str(projector))
    assert parse_spec("hf:o/r/m.gguf;mmproj=hf:o/r/mmproj.gguf").mmproj == "hf:o/r/mmproj.gguf"
    for bad in ("superfluid/tiny-chatml;mmproj=p.gguf", f"{model};mmproj=p.bin"):
        with pytest.raises(ValueError, match="mmproj"):
            parse_spec(bad)
    registry = ModelRegistry([spec.spec, "superfluid/tiny-chatml"], cache_dir=tmp_path / "c")

    async def load() -> tuple[bool, bool]:
        try:
            eyes = await registry.get("eyes")
            plain = await registry.get("superfluid/tiny-chatml")
            return eyes.info.accepts_images, plain.info.accepts_images
        finally:
            await registry.close()

    assert asyncio.run(load()) == (True, False)


def test_a_projector_for_another_model_fails_to_load(
    tmp_path: Path, sf_models: dict[str, Path]
) -> None:
    from jupyter_superfluid.builtin_models.tiny_mmproj import build_mmproj

    projector = build_mmproj(tmp_path / "p.gguf", text_n_embd=32, kind="vision")  # model: 64
    with pytest.raises(ModelLoadError, match="projector"):
        LlamaEngine.load("m", sf_models["superfluid/tiny-chatml"], mmproj=projector)


def test_an_async_launcher_is_awaited_with_the_resolved_options(tmp_path: Path) -> None:
    calls: list[tuple[str, Path, dict]] = []

    async def launcher(model_id: str, path: Path, **options: object) -> LlamaEngine:
        calls.append((model_id, path, options))
        return await asyncio.to_thread(LlamaEngine.load, model_id, path, **options)  # type: ignore[arg-type]

    registry = ModelRegistry(
        ["superfluid/tiny-vision"], cache_dir=tmp_path, launcher=launcher, context_size=256
    )

    async def scenario() -> list:
        engines = await asyncio.gather(*(registry.get("superfluid/tiny-vision") for _ in range(2)))
        await registry.close()
        return engines

    first, second = asyncio.run(scenario())
    assert first is second and len(calls) == 1  # one launch for concurrent callers
    model_id, path, options = calls[0]
    assert (model_id, path) == ("superfluid/tiny-vision", registry.resolve(model_id))
    assert options == {
        "context_size": 256,
        "threads": 1,
        "mmproj": registry.resolve_projector(model_id),
    }
    assert first.info.accepts_images
