"""The ``hearth`` command line (:mod:`app.surfaces.cli.main`) and its sub-commands, one module per group."""
