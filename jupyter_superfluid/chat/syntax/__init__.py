"""Template analysis: the syntax of a chat template's tool calls and reasoning."""
