"""The suite in two speeds: which tests the fast tier leaves to the full suite.

The full suite (the README's test command, CI's) runs everything. The fast tier, run after every
change, is every test marked ``fast``: ``.venv/bin/python -m pytest -n 2 --dist loadfile -m fast``.
``tests/conftest.py`` marks each test ``fast`` unless its file is in :data:`FULL_ONLY`, and marks it
again when it is one of :data:`SMOKES`: a new test file is in the fast tier until it is found slow.

:data:`FULL_ONLY` holds the files that took 8 s or more in a full run (their tests' setup, call and
teardown summed, ``--durations=0``): real-shape exactness matrices, many real worker starts, the
bundle build. :data:`SMOKES` keeps one real run per surface among them, so the fast tier still
starts a real worker from the command line, the window and the API (every other package is in the
tier through its own fast files). ``tests/unit/test_tiers.py`` checks that every name here exists.
"""

from __future__ import annotations

FULL_ONLY = frozenset({
    "app/test_bad_model_files.py",
    "app/test_bounded_model_files.py",
    "app/test_cli_crash.py",
    "app/test_cli_first_day.py",
    "app/test_cli_process.py",
    "app/test_cli_sampling_settings.py",
    "app/test_context_cli.py",
    "app/test_context_cut_cli.py",
    "app/test_control_tokens_cli.py",
    "app/test_damaged_database.py",
    "app/test_default_sampling_loops.py",
    "app/test_device_commands.py",
    "app/test_doctor.py",
    "app/test_draft_auto.py",
    "app/test_draft_paths_cli.py",
    "app/test_eagle3_cli.py",
    "app/test_eagle3_import.py",
    "app/test_engines_cli.py",
    "app/test_file_permissions.py",
    "app/test_first_hour_cli.py",
    "app/test_first_hour_cli_third.py",
    "app/test_json_schema_cli.py",
    "app/test_model_commands.py",
    "app/test_model_pull.py",
    "app/test_oracle.py",
    "app/test_reasoning_surfaces.py",
    "app/test_repeat_window.py",
    "app/test_sequence_penalty_cli.py",
    "app/test_serve_api.py",
    "app/test_serve_behaviour.py",
    "app/test_serve_hostile_clients.py",
    "app/test_serve_limits.py",
    "app/test_serve_log.py",
    "app/test_serve_response_format.py",
    "app/test_serve_tool_choice.py",
    "app/test_serve_tools.py",
    "app/test_tool_box.py",
    "app/test_serve_restart.py",
    "app/test_state_file_modes.py",
    "app/test_storage_limits.py",
    "app/test_terminal_escapes.py",
    "app/test_terminal_escapes_serve.py",
    "app/test_two_writers.py",
    "engine/test_constraint_drafting.py",
    "engine/test_tool_call_drafting.py",
    "engine/test_cpu_check.py",
    "engine/test_draft_auto.py",
    "engine/test_drafting.py",
    "engine/test_drafting_tree.py",
    "engine/test_eagle3_transformer.py",
    "engine/test_mtp_converter_layout.py",
    "engine/test_prefill_chunks.py",
    "engine/test_pruned_prefill.py",
    "engine/test_quant_exactness.py",
    "engine/test_remote_faults.py",
    "engine/test_remote_llama_server.py",
    "installers/test_bundle_linux.py",
    "process/test_context_memory.py",
    "process/test_embedded_layout.py",
    "process/test_hostile_template.py",
    "process/test_npu_prefill.py",
    "process/test_numeric_ranges.py",
    "process/test_request_ends.py",
    "process/test_snapshot_exactness.py",
    "process/test_snapshot_robustness.py",
    "process/test_snapshot_storage.py",
    "process/test_system_prompt.py",
    "process/test_telemetry.py",
    "process/test_template_reuse.py",
    "process/test_whole_prompt_state.py",
    "process/test_worker_lifecycle.py",
    "store/test_atomicity.py",
    "store/test_downloads.py",
    "store/test_recovery_fuzz.py",
    "ui/test_api_server.py",
    "ui/test_app_chat.py",
    "ui/test_app_context_cut.py",
    "ui/test_app_crash_loop.py",
    "ui/test_app_documents.py",
    "ui/test_app_resume.py",
    "ui/test_app_store_failures.py",
    "ui/test_app_window.py",
    "ui/test_context_chart.py",
    "ui/test_first_hour.py",
    "ui/test_first_hour_notices.py",
    "ui/test_nothing_cut_off.py",
    "ui/test_window_tools.py",
    "unit/test_acceptance_rule.py",
    "unit/test_fault_proxy.py",
    "unit/test_template_budget.py",})

SMOKES = frozenset({
    "app/test_cli_process.py::test_hearth_entry_point_generates_json",  # the command line, a real worker
    "app/test_serve_api.py::test_a_chat_answer_streamed_equals_the_same_answer_in_one_piece",  # the API, openai client
    "process/test_worker_lifecycle.py::test_handshake_reports_versions_and_devices",  # the worker's handshake
    "ui/test_app_chat.py::test_a_message_streams_token_by_token_then_is_stored",  # the window, a real worker
    "ui/test_app_window.py::test_first_run_opens_a_chat_on_the_embedded_default_model",  # a new user's first window
})


def in_fast_tier(nodeid: str) -> bool:
    """Whether the test with this pytest node id (relative to ``tests/``'s parent) runs in the fast tier."""
    relative = nodeid.removeprefix("tests/")
    return relative.split("::", 1)[0] not in FULL_ONLY or relative.split("[", 1)[0] in SMOKES
