"""Remote engines: a conversation answered by an OpenAI-compatible server (vLLM, llama.cpp's server,
Ollama, another Hearth) instead of this computer's worker, with everything else staying local.

:class:`app.engine_clients.remote.client.RemoteClient` is an :class:`app.engine_clients.client.EngineClient` like the
worker's clients: the app sends it the same commands and reads the same events, so the CLI, the
window and the turn and document services need no second path. Only the model's work crosses the
network: the messages of the branch being answered, nothing else.
"""
