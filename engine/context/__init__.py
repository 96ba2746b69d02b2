"""How long a context a model gets, how much memory it takes, growing it, and documents that must fit in it."""
