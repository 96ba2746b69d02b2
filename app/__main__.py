"""``python -m app`` opens the desktop app; ``python -m app chat|generate|…`` runs the CLI."""

import sys

from app.surfaces.entry import main, open_window

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) if sys.argv[1:] else open_window())
