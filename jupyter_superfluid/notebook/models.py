"""The served models from the kernel: see them, follow them, pull, load, unload, remove.

``ModelsClient`` talks to the server's models API (``/superfluid/v1/models…``), found
like every other notebook call (``client.find_server``). ``follow`` reads its event
stream: one ``models.snapshot``, then every change, each carrying a model's whole state;
a dropped connection is resumed with ``Last-Event-ID`` (a server that restarted meanwhile
answers with a fresh snapshot). ``wait_for`` follows one model until a state it wants.

HTTP only, like the rest of the notebook side: a state is the server's JSON object
(``id``, ``state``, ``progress``, ``error``…, see docs/user-guide/models.md, "Model states").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

from jupyter_superfluid.notebook.client import Endpoint, find_server
from jupyter_superfluid.notebook.lmsp import sse_events

State = dict[str, Any]
BUSY = ("downloading", "loading")
RECONNECT_S = 1.0


class ModelsError(RuntimeError):
    """The models API refused a request, or a model ended where it was not wanted."""

    def __init__(self, message: str, *, status: int | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.code = status, code


class ModelsClient:
    """Blocking calls to one server's models API."""

    def __init__(self, endpoint: Endpoint | None = None, *, timeout: float = 60.0) -> None:
        import httpx

        self.endpoint = endpoint or find_server()
        self.url = self.endpoint.root + "superfluid/v1/models"
        headers = {"Authorization": f"Bearer {self.endpoint.api_key}"}
        # trust_env=False: a proxy configured for the internet must not see loopback calls.
        self.http = httpx.Client(headers=headers, timeout=timeout, trust_env=False)

    def _call(self, method: str, path: str = "", **kwargs: Any) -> Any:
        response = self.http.request(method, self.url + path, **kwargs)
        if response.status_code >= 400:
            raise _error(response)
        return response.json()

    def list(self) -> list[State]:
        """Every served model's state."""
        return list(self._call("GET")["data"])

    def get(self, model_id: str) -> State:
        """One model's state."""
        return dict(self._call("GET", _path(model_id)))

    def add(self, spec: str, *, load: bool = False) -> State:
        """Serve one more model (its download starts); its state."""
        return dict(self._call("POST", json={"spec": spec, "load": load}))

    def load(self, model_id: str) -> State:
        """Start loading a model (downloading it first if needed); its state."""
        return dict(self._call("POST", _path(model_id) + "/load"))

    def unload(self, model_id: str) -> State:
        """Free a model's memory, or stop its download; its state."""
        return dict(self._call("POST", _path(model_id) + "/unload"))

    def remove(self, model_id: str, *, delete_files: bool = False) -> None:
        """Stop serving a model (and delete its downloaded files, if asked)."""
        params = {"delete_files": "true"} if delete_files else {}
        self._call("DELETE", _path(model_id), params=params)

    def follow(
        self, model: str | None = None, *, stop: threading.Event | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(event name, data) of the event stream, reconnecting, until ``stop`` is set."""
        import httpx

        last: int | None = None
        stop = stop or threading.Event()
        timeout = httpx.Timeout(self.http.timeout.connect, read=60.0)  # keepalives every 15 s
        while not stop.is_set():
            headers = {} if last is None else {"Last-Event-ID": str(last)}
            params = {} if model is None else {"model": model}
            try:
                with self.http.stream(
                    "GET", self.url + "/events", headers=headers, params=params, timeout=timeout
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        raise _error(response)
                    for event_id, name, data in sse_events(response.iter_lines()):
                        last = event_id if event_id is not None else last
                        yield name, data
                        if stop.is_set():
                            return
            except httpx.TransportError:
                if stop.wait(RECONNECT_S):  # the server went away: try again shortly
                    return

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()


def state_of(name: str, data: Mapping[str, Any], model_id: str) -> State | None:
    """The state of ``model_id`` an event gives (None when it says nothing of it).

    Raises ModelsError when the model is not served (any more).
    """
    if name == "models.snapshot":
        found = [m for m in data.get("data") or [] if m.get("id") == model_id]
        if not found:
            raise ModelsError(f"the model {model_id!r} is not served here", code="model_not_found")
        return dict(found[0])
    model = data.get("model") or {}
    if not name.startswith("model.") or model.get("id") != model_id:
        return None
    if name == "model.removed":
        raise ModelsError(f"the model {model_id!r} was removed", code="model_not_found")
    return dict(model)


def wait_for(
    client: ModelsClient,
    model_id: str,
    done: Callable[[State], bool],
    on_state: Callable[[State], None] | None = None,
) -> State:
    """Follow ``model_id`` until ``done(state)``; that state (``on_state`` sees each one)."""
    stop = threading.Event()
    try:
        for name, data in client.follow(model_id, stop=stop):
            state = state_of(name, data, model_id)
            if state is None:
                continue
            if on_state is not None:
                on_state(state)
            if done(state):
                return state
    finally:
        stop.set()
    raise ModelsError(f"the event stream of {model_id!r} ended")


def settled(state: State) -> bool:
    """Whether a model is neither downloading nor loading."""
    return state.get("state") not in BUSY


def _path(model_id: str) -> str:
    return "/" + quote(model_id, safe="/")


def _error(response: Any) -> ModelsError:
    """The API's error (OpenAI's shape) as a ModelsError."""
    try:
        error = response.json().get("error") or {}
    except ValueError:
        error = {}
    message = error.get("message") or response.text[:200] or response.reason_phrase
    code = error.get("code")
    return ModelsError(
        f"{response.status_code} {code or 'error'}: {message}",
        status=response.status_code,
        code=code,
    )


def wait_until_ready(
    model_id: str, on_state: Callable[[State], None], endpoint: Endpoint | None = None
) -> State:
    """Follow a model the server answered ``model_loading`` for, until it settles.

    Raises ModelsError when it ends ``failed`` (with the reason) or is removed.
    """
    client = ModelsClient(endpoint)
    try:
        state = wait_for(client, model_id, settled, on_state)
    finally:
        client.close()
    if state.get("state") == "failed":
        raise ModelsError(f"{model_id}: {state.get('error')}", code=state.get("error_code"))
    return state
