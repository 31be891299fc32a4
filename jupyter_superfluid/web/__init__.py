"""The web layer: the one base handler, authentication, request validation and OpenAPI.

``base`` (``ProtocolHandler``: auth, JSON bodies, error shapes, server-sent events),
``auth`` (keys, key policies, principals), ``validation`` (pydantic bodies to 400s
naming the field) and ``openapi`` (the document derived from the route tables).
"""
