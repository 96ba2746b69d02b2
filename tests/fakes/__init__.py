"""Stand-ins for the parts of Hearth that tests replace: the engine client (controller tests) and an
inference backend (fast tests of the engine core, tests/engine/test_core_fake_backend.py)."""
