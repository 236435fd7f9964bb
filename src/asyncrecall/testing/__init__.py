"""Public test helpers: a scripted model and a local OpenAI-compatible server."""
