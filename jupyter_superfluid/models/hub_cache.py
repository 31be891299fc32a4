"""The Hugging Face hub's cache, read and pruned here without asking the hub.

Where the cache and the hub are (``HF_HUB_CACHE`` / ``HF_HOME``, ``HF_ENDPOINT``,
``HF_HUB_OFFLINE``), all read from the environment when asked, not when
huggingface_hub was imported; whether a file is cached; how far its unfinished
download got (``downloads.py`` keeps a partial file per file); and deleting a file.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

HUB_PROBE_TIMEOUT_S = 3.0


@dataclass(frozen=True)
class HubFile:
    """One file of a hub repository."""

    repo_id: str
    filename: str

    @property
    def spec(self) -> str:
        """The file as a model spec writes it (``hf:OWNER/REPO/FILE``)."""
        return f"hf:{self.repo_id}/{self.filename}"


def hub_endpoint() -> str:
    """The hub's URL, read from ``HF_ENDPOINT`` now (not at huggingface_hub's import)."""
    return (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def hub_cache_dir() -> str:
    """huggingface_hub's cache, read from the environment now (not at its import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "huggingface",
    )
    return os.path.join(home, "hub")


def hub_offline() -> bool:
    """Whether HF_HUB_OFFLINE is set (read now)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def probe_hub() -> str | None:
    """Why the hub cannot be reached, or None if a TCP connection opens quickly."""
    if any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None  # behind a proxy a direct probe proves nothing; let the client try
    url = urlparse(hub_endpoint())
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=HUB_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return f"cannot reach {url.hostname}: {exc}"
    return None


def repo_folder(repo_id: str) -> Path:
    """The cache folder of a model repository (``models--OWNER--REPO``)."""
    return Path(hub_cache_dir()) / ("models--" + repo_id.replace("/", "--"))


def cached_file(file: HubFile) -> Path | None:
    """The file's path in the cache, or None when it is not there (never asks the hub)."""
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(
            file.repo_id, file.filename, cache_dir=hub_cache_dir(), local_files_only=True
        )
    except Exception:  # not cached, or a broken entry: either way not usable
        return None
    return Path(path)


def partial_bytes(file: HubFile) -> int:
    """Bytes already fetched of an unfinished download of ``file`` (0 if none)."""
    marker = partial_marker(file)
    try:
        partial = repo_folder(file.repo_id) / "blobs" / f"{marker.read_text().strip()}.incomplete"
        return partial.stat().st_size
    except OSError:
        return 0


def delete_cached(file: HubFile) -> list[Path]:
    """Remove ``file`` from the cache (its snapshot links, any partial); the paths removed.

    Its blob goes too, unless another file's link still points at it (files with the
    same bytes share one blob, as huggingface_hub stores them).
    """
    removed: list[Path] = []
    folder = repo_folder(file.repo_id)
    blobs = (folder / "blobs").resolve() if (folder / "blobs").exists() else None
    targets = set()
    for link in sorted(folder.glob(f"snapshots/*/{file.filename}")):
        targets.add(link.resolve())
        link.unlink()
        removed.append(link)
    still_used = {p.resolve() for p in folder.glob("snapshots/**/*") if p.is_symlink()}
    for target in sorted(targets - still_used):
        if blobs is not None and target.parent == blobs and target.exists():
            target.unlink()
            removed.append(target)
    marker = partial_marker(file)
    if marker.exists():
        partial = folder / "blobs" / f"{marker.read_text().strip()}.incomplete"
        for path in (partial, marker):
            if path.exists():
                path.unlink()
                removed.append(path)
    return removed


def partial_marker(file: HubFile) -> Path:
    """Names the ETag of the file's partial download (so it is found without the hub)."""
    safe = file.filename.replace("/", "--")
    return repo_folder(file.repo_id) / "blobs" / f".superfluid-partial--{safe}"
