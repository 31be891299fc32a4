"""The engine in a supervised process of its own (the default engine isolation).

``client`` (``ProcessEngine``: the Engine seam in the server), ``supervisor``
(restarts with backoff), ``spawn`` (one running engine process: its sockets, its
log, its death), ``wire`` (the messages and their framing) and ``child`` (the
engine process's main, which loads ``local.llama.LlamaEngine``). Only ``child``
imports ``local``; the server side never loads llama_cpp.
"""
