"""Stand-ins for the parts of Hearth that tests replace: only the engine client, so far."""
