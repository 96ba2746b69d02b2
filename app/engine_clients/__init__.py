"""The app's side of the pipe: the clients that talk to an engine, all running in the app's process.

:mod:`~app.engine_clients.client` is the one interface (``EngineClient``), :mod:`~app.engine_clients.process_client`
starts the worker process and reads its events, :mod:`~app.engine_clients.inproc_client` runs the worker's
loop on a thread here (the CLI's quick paths, tests and benchmarks), and :mod:`~app.engine_clients.remote`
speaks to a remote OpenAI-compatible engine and routes between it and this computer's worker. What
runs in the worker is under ``engine/``; the messages both sides speak are ``engine.protocol``.
"""
