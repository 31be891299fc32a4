"""The model engine: the Engine seam (``base``) and its three implementations.

``local`` (llama.cpp in this process or the engine process), ``process`` (the engine
process: spawn, supervise, and the wire between the two processes) and ``remote``
(llama-server and other serving engines over HTTP); ``launch`` starts one of them.
What decides which models exist is ``models``; the built-in tiny models are
``builtin_models``.

Nothing is imported here, so ``engine.base`` stays importable without llama_cpp.
"""
