"""The demo notebooks (``notebooks/``), executed end to end against a live Jupyter server."""
