"""The model engine: the Engine seam (``base``), llama.cpp behind it (``llama``),
model resolution (``registry``) and the built-in tiny test models (``testmodels``).

Nothing is imported here, so ``engine.base`` stays importable without llama_cpp.
"""
