"""The model engine: the Engine seam (``base``), llama.cpp behind it (``local``),
model resolution (``registry``), llama.cpp's own sources (``llama_sources``) and the
built-in tiny test models (``testmodels``).

Nothing is imported here, so ``engine.base`` stays importable without llama_cpp.
"""
