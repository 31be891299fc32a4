"""The superfluid models API (``/superfluid/v1/models…``): see models, follow them, manage them.

Every served model's lifecycle state (the same one ``/v1/models`` and LMSP discovery
report), a resumable stream of its changes (server-sent events), and run-time
management: add a model by spec (which starts its download), load, unload, remove.
Reading needs ``models:read``; changing needs ``models:write``.
"""
