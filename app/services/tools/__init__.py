"""Tools the model may call from the window: the built-in ones and the user's MCP servers."""
