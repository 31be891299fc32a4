"""The served models, one source of truth for every surface.

``lifecycle`` (``ModelLifecycle``: each model's state machine — download, load, unload,
remove — and its numbered event log), ``states`` (the states and events as plain data),
``served_set`` (which models are served, persisted across restarts) and ``hub``
(``ModelHub``: what the chat path asks for — a loaded model and its chat codec, or the
error a request gets while it is not ready). Its HTTP face is ``models_api``.
"""
