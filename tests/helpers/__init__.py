"""Helpers shared by test modules: import them from here, never from another test module."""
