"""The llama.cpp engine itself: what runs where the model is loaded.

``llama`` (``LlamaEngine``: the Engine seam over llama-cpp-python's low-level API),
``worker`` (the continuous-batching step loop), ``kv`` (the prefix cache and the KV
tiers: resident, host memory, disk), ``sampling`` (per-request sampler chains),
``media`` (mtmd projectors) and ``native`` (thin ctypes helpers). Only this folder
imports ``llama_cpp``.
"""
