"""Integrations with other Jupyter tools, over this server's HTTP API only.

``jupyter_ai``: a Jupyter AI 3 persona (the ``jupyter-ai`` extra).
"""
