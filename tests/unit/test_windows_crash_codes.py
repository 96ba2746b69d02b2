"""A native crash on Windows is an exit status (0xC000001D for an illegal instruction), not a
signal: the canary and the worker's death read it as the crash it is. Windows is not here to crash
on, so the statuses are given as Windows reports them."""

from engine.backends.cpu_check import parse_canary_output
from engine.protocol.deaths import engine_dead

ILLEGAL_INSTRUCTION = 0xC000001D  # 3221225501
ACCESS_VIOLATION = 0xC0000005


def test_a_canary_that_dies_of_an_illegal_instruction_on_windows_is_a_crashed_build():
    result = parse_canary_output("", "", ILLEGAL_INSTRUCTION)
    assert (result.status, result.signal) == ("crashed", "SIGILL")  # cached: the build is not tried again


def test_a_posix_signal_and_the_windows_status_mean_the_same_crash():
    assert parse_canary_output("", "", -4).signal == parse_canary_output("", "", ILLEGAL_INSTRUCTION).signal


def test_a_worker_that_dies_of_an_access_violation_says_the_library_crashed():
    dead = engine_dead(ACCESS_VIOLATION, cpu_variant="haswell")
    assert dead.signal == "SIGSEGV" and "crashed" in dead.message and "haswell" in dead.message


def test_an_ordinary_exit_status_is_not_a_crash():
    assert parse_canary_output("", "bad flag", 2).status == "failed"
    assert engine_dead(1).signal in (None, "") and engine_dead(1).message == "the engine exited with status 1"
