"""The kernel side of jupyter_superfluid: zero-config clients and the ``%%respond`` magic.

HTTP only: nothing here imports the engine, the app, the handlers or llama_cpp, so it
works against a remote server too. Submodules are imported lazily by the package's
entry points (``jupyter_superfluid.client()``, ``%load_ext jupyter_superfluid``).
"""
