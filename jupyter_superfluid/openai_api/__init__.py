"""The OpenAI-compatible endpoints: /v1/models, /v1/chat/completions and /v1/responses."""
