"""The built-in tiny models: deterministic random-weight GGUFs that work offline.

``tiny_gguf`` builds the text models (``superfluid/tiny-chatml``, ``superfluid/tiny-qwen3``
and the others in ``BUILTIN_MODELS``), ``tiny_mmproj`` their image and audio projectors,
and ``templates`` the chat templates they carry. ``models.registry`` serves them by id.
"""
