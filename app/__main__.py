"""``python -m app``: opens the app (the chat in the terminal until the GUI exists)."""

import sys

from app.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["chat"]))
