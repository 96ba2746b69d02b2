"""Which devices this machine has, and which one runs each phase of a request.

* :mod:`engine.devices.probe` (with :mod:`~engine.devices.cpu` and the QNN half in
  :mod:`engine.backends.qnn`) finds the devices once per worker process; the result is reported
  in the handshake (``Ready.devices``).
* :mod:`engine.devices.router` is a pure function from the model's capabilities, the probed
  devices, the user's policy, the input length and the calibration to a plan per phase, each
  choice with a reason (``ModelLoaded.devices``).
* :mod:`engine.devices.calibration` holds the measured prefill speeds the router's length
  threshold comes from.

Nothing here imports onnxruntime: :mod:`engine.backends.qnn` is the only module that does.
"""
