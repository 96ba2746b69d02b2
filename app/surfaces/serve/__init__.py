"""``hearth serve``: the OpenAI-compatible HTTP API (Starlette on uvicorn) over one engine worker.

Below the command line in the layers (``app.surfaces.cli`` starts it; the window starts it as a process), above
the services it uses; never Qt. ``schema`` reads requests, ``replies`` writes answers and errors,
``conversations`` maps requests onto stored branches so snapshots are reused, ``runner`` feeds the
worker one request at a time, ``routes`` is the HTTP side and ``main`` the command.
"""
