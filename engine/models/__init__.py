"""Model files: finding and checking them, the built-in model's fast-reading copy, loading one into a session."""
