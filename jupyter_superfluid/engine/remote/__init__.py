"""Remote engines: a serving engine elsewhere generates, superfluid keeps the rest.

A remote engine implements ``engine.base.Engine`` over HTTP. Superfluid keeps what
is its own — the protocols, durable sessions, chat template rendering, tool parsing,
grammars and keys — and sends the remote each prompt as exact token ids, so that the
remote's own prefix cache serves continuations of stored conversations warm.

- ``llama_server``: llama.cpp's ``llama-server`` (model spec ``[ID=]llama-server:URL``),
  with ``llama_completion``, its ``/completion`` wire format (request body, chunks).
- ``build``: builds ``llama-server`` from the llama.cpp sources that the installed
  llama-cpp-python vendors (``jupyter superfluid build-llama-server``).

Each dialect is one module (plus its wire format). Another engine that takes token-id
prompts (vLLM's or SGLang's ``/v1/completions``) would be one more, once something here
can test it.
"""
