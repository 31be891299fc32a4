"""llama.cpp's corpus of real chat templates: tiny models that carry them, and their table.

``vocabulary`` finds a template's special tokens, ``tiny_models`` builds a tiny model
that carries the template and tokenizes like the real one, and ``report`` probes each
template for the docs' table (``python -m tools.doc_tables``) and ``tests/corpus``.
"""
