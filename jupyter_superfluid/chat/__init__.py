"""The chat layer: templates (codec), output parsers, grammars and sampling; no HTTP."""
