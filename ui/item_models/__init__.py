"""Qt item models (lists the views show: conversations, messages); not language models."""
