"""The bundle's ``Hearth`` executable: the window, as ``python -m app`` opens it (with arguments, the
command line). Started as ``Hearth --hearth-run-module M`` it is one of the app's own child processes."""

import sys

from engine.protocol.child_command import run_module_if_asked

if __name__ == "__main__":
    run_module_if_asked(sys.argv)
    if sys.argv[1:]:
        from app.surfaces.cli.main import main as cli_main

        sys.exit(cli_main(sys.argv[1:]))
    from app.surfaces.gui import main

    sys.exit(main())
