"""``python -m app`` opens the desktop app; ``python -m app chat|generate|…`` runs the CLI."""

import sys

if __name__ == "__main__":
    if sys.argv[1:]:
        from app.cli.main import main

        sys.exit(main(sys.argv[1:]))
    from app.gui import main

    sys.exit(main())
