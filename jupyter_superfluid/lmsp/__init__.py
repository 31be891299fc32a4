"""LMSP 1.0 under ``/lmsp/v1``: the same chat path and store as the OpenAI API.

Roles mirror ``openai_api``: ``protocol`` (request validation), ``events``
(pure serializers), ``responses`` (the service), ``handlers`` (thin Tornado
handlers; the URL table is at the bottom), plus ``tasks``, ``idempotency``,
``discovery`` and ``problems`` (RFC 9457 error documents). ``lmsp`` and
``openai_api`` never import each other.
"""
