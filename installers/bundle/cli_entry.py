"""The bundle's ``hearth`` executable: the command line, as the ``hearth`` script of a pip install.
Started as ``hearth --hearth-run-module M`` it is one of the app's own child processes."""

import sys

from engine.protocol.child_command import run_module_if_asked

if __name__ == "__main__":
    run_module_if_asked(sys.argv)
    from app.surfaces.entry import main

    sys.exit(main(sys.argv[1:]))
