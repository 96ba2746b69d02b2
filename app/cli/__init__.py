"""The ``hearth`` command line (:mod:`app.cli.main`) and its sub-commands, one module per group."""
