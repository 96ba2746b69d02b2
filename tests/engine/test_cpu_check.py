"""Choosing this machine's CPU build of llama.cpp, with real canary children, real crashes (the
test-only switch HEARTH_TEST_CPU_FAULT kills the canary with a real signal) and the real cache.

``cpu_check.choose`` runs in this process: it only starts canary children and reads and writes the
cache file. Anything that loads a build (a process can load only one) runs in a worker process.
Which builds pass here is measured once per module (``measured``), so the expectations hold on any
x86 machine with two usable builds; on this one the fastest is icelake and the next safer haswell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from engine import protocol as p
from engine.backends import cpu_check
from engine.backends.canary import WEIGHT_TYPES
from engine.backends.cpu_check import CHECK_FILE_ENV, VARIANT_ENV, CanaryResult, CpuChoice, cache_key, choose
from engine.backends.cpu_variants import CpuBackendError, read_variant_set
from engine.backends.faults import FAULT_ENV
from app.engine_clients.client import new_request_id
from app.engine_clients.process_client import ProcessClient

VARIANTS = read_variant_set()
pytestmark = pytest.mark.skipif(VARIANTS is None, reason="llama-cpp-python is not Hearth's portable build")


@dataclass(frozen=True)
class Measured:
    """Every build's canary on this machine, with no fault injected."""

    results: dict[str, CanaryResult]

    def passing(self) -> list[str]:
        return [name for name, r in self.results.items() if r.status == "ok"]

    @property
    def fastest(self) -> str:
        return self.passing()[0]

    @property
    def next_safer(self) -> str:
        return self.passing()[1]

    @property
    def unsupported(self) -> list[str]:
        return [name for name, r in self.results.items() if r.status == "unsupported"]


@pytest.fixture(scope="module")
def measured() -> Measured:
    results = {v.name: cpu_check.run_canary(v) for v in VARIANTS.variants}
    found = Measured(results)
    if len(found.passing()) < 2:
        pytest.skip(f"fewer than two CPU builds pass here: {results}")
    return found


@pytest.fixture
def check_file(tmp_path, monkeypatch) -> Path:
    """A fresh cache of CPU checks for this test, also for the workers it starts."""
    path = tmp_path / "cpu-check.json"
    monkeypatch.setenv(CHECK_FILE_ENV, str(path))
    monkeypatch.delenv(FAULT_ENV, raising=False)
    monkeypatch.delenv(VARIANT_ENV, raising=False)
    return path


def cache_entries(path: Path) -> list[dict]:
    return json.loads(path.read_text())["entries"]


def stored_results(path: Path, variants=VARIANTS) -> dict[str, dict]:
    """What the cache file holds for ``variants`` (as written on disk)."""
    (entry,) = [e for e in cache_entries(path) if e["key"] == cache_key(variants)]
    return entry["results"]


# -- a crashing canary ----------------------------------------------------------------------------


@pytest.mark.parametrize("signal_name", ["SIGILL", "SIGSEGV"])
def test_a_build_whose_canary_crashes_is_skipped_for_the_next_safer_one(signal_name, check_file, monkeypatch,
                                                                         measured):
    monkeypatch.setenv(FAULT_ENV, f"canary:{measured.fastest}:{signal_name}")
    choice = choose(VARIANTS, "auto", check_file)
    assert choice.variant == measured.next_safer and not choice.cached
    crashed = choice.results[measured.fastest]
    assert (crashed.status, crashed.signal) == ("crashed", signal_name)
    assert choice.results[measured.next_safer].status == "ok"
    assert f"{measured.fastest}: crashed ({signal_name}) in its canary" in choice.reason
    stored = stored_results(check_file)
    assert set(stored) == set(choice.results)  # every build tried, the crash and the pass both
    assert (stored[measured.fastest]["status"], stored[measured.fastest]["signal"]) == ("crashed", signal_name)
    assert stored[measured.next_safer]["status"] == "ok"


def test_a_second_choice_comes_from_the_cache_and_runs_no_canary(check_file, monkeypatch, measured):
    monkeypatch.setenv(FAULT_ENV, f"canary:{measured.fastest}:SIGILL")
    first = choose(VARIANTS, "auto", check_file)
    saved = check_file.read_bytes()

    monkeypatch.delenv(FAULT_ENV)  # the fastest build's canary would pass now, if it ran
    second = choose(VARIANTS, "auto", check_file)
    assert second.variant == measured.next_safer and second.cached
    assert second.results == first.results

    # Every canary that runs now dies of SIGSEGV and would be recorded so: the choice must not change.
    monkeypatch.setenv(FAULT_ENV, "canary:*:SIGSEGV")
    third = choose(VARIANTS, "auto", check_file)
    assert third.variant == measured.next_safer and third.cached
    assert third.results[measured.fastest].signal == "SIGILL"
    assert check_file.read_bytes() == saved  # nothing ran, so nothing was written


def changed_sets(tmp_path: Path, measured: Measured) -> dict[str, object]:
    """The installed set of builds, changed in each way the cache key must notice."""
    bigger = tmp_path / "libggml-cpu-rebuilt.so"
    original = VARIANTS.named(measured.fastest).path
    bigger.write_bytes(original.read_bytes() + b"\0" * 64)
    # A build that is neither the fastest nor its fallback: on a CPU that runs only the two safest
    # (haswell, sse42), dropping the safest would leave nothing to fall back on once the fastest fails.
    dropped = next(v.name for v in VARIANTS.variants if v.name not in (measured.fastest, measured.next_safer))
    return {
        "the build key": replace(VARIANTS, build_key=VARIANTS.build_key + "-rebuilt"),
        "the set of builds": replace(VARIANTS, variants=tuple(v for v in VARIANTS.variants if v.name != dropped)),
        "a build's file": replace(VARIANTS, variants=tuple(replace(v, path=bigger) if v.name == measured.fastest
                                                          else v for v in VARIANTS.variants)),
    }


def test_the_cache_key_changes_with_the_build_the_builds_and_their_files(tmp_path, measured):
    key = cache_key(VARIANTS)
    assert cache_key(VARIANTS) == key
    assert key["machine"] == cpu_check.machine_id() and key["build"] == VARIANTS.build_key
    changed = {what: cache_key(variants) for what, variants in changed_sets(tmp_path, measured).items()}
    for what, other in changed.items():
        assert other != key, f"changing {what} kept the cache key"
    assert len({json.dumps(k, sort_keys=True) for k in changed.values()}) == len(changed)


@pytest.mark.parametrize("what", ["the build key", "the set of builds", "a build's file"])
def test_a_changed_key_runs_the_canaries_again(what, tmp_path, check_file, monkeypatch, measured):
    monkeypatch.setenv(FAULT_ENV, f"canary:{measured.fastest}:SIGILL")
    choose(VARIANTS, "auto", check_file)
    monkeypatch.setenv(FAULT_ENV, f"canary:{measured.fastest}:SIGSEGV")
    changed = changed_sets(tmp_path, measured)[what]
    again = choose(changed, "auto", check_file)
    assert not again.cached and again.results[measured.fastest].signal == "SIGSEGV"  # its canary ran again
    assert len(cache_entries(check_file)) == 2
    assert stored_results(check_file)[measured.fastest]["signal"] == "SIGILL"  # the first key keeps its own
    assert stored_results(check_file, changed)[measured.fastest]["signal"] == "SIGSEGV"


# -- asking for a build ---------------------------------------------------------------------------


def test_safe_takes_the_safest_build(check_file):
    choice = choose(VARIANTS, "safe", check_file)
    safest = VARIANTS.names[-1]  # sse42 (x86-64-v2) on this machine
    assert choice.variant == safest and list(choice.results) == [safest]
    assert choice.reason.startswith("the safest build")


def test_a_build_asked_for_by_name_is_the_only_one_tried(check_file, measured):
    choice = choose(VARIANTS, measured.next_safer, check_file)
    assert choice.variant == measured.next_safer and list(choice.results) == [measured.next_safer]
    assert "asked for by name" in choice.reason


def test_a_build_asked_for_by_name_that_this_cpu_lacks_is_refused_in_words(check_file, measured):
    if not measured.unsupported:
        pytest.skip("this CPU supports every build")
    name = measured.unsupported[0]
    with pytest.raises(CpuBackendError) as refused:
        choose(VARIANTS, name, check_file)
    message = str(refused.value)
    assert f"the CPU build {name} (asked for by name) does not run on this machine" in message
    assert "not for this CPU" in message and "auto" in message


def test_an_unknown_build_name_is_refused_with_the_list_of_builds(check_file):
    with pytest.raises(CpuBackendError) as refused:
        choose(VARIANTS, "turbo9000", check_file)
    message = str(refused.value)
    assert "there is no CPU build named 'turbo9000'" in message
    assert ", ".join(VARIANTS.names) in message and "auto or safe" in message
    assert not check_file.exists()  # nothing was tried


# -- failures that are not crashes ----------------------------------------------------------------


def test_a_canary_that_times_out_fails_and_is_not_cached(check_file, measured):
    variant = VARIANTS.named(measured.fastest)
    result = cpu_check.run_canary(variant, timeout_s=0.05)
    assert result.status == "failed" and "did not finish within 0.05 s" in result.detail
    key = cache_key(VARIANTS)
    cpu_check.write_cache(check_file, key, {measured.fastest: result,
                                            measured.next_safer: measured.results[measured.next_safer]})
    assert cpu_check.read_cache(check_file, key) == {measured.next_safer: measured.results[measured.next_safer]}


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_a_canary_killed_from_outside_is_skipped_but_not_cached(signal_name, check_file, monkeypatch, measured):
    """The out-of-memory killer (SIGKILL) or a log-out (SIGTERM) says nothing about the build."""
    monkeypatch.setenv(FAULT_ENV, f"canary:{measured.fastest}:{signal_name}")
    choice = choose(VARIANTS, "auto", check_file)
    assert choice.variant == measured.next_safer
    killed = choice.results[measured.fastest]
    assert (killed.status, killed.signal) == ("failed", signal_name)
    assert measured.fastest not in stored_results(check_file)

    monkeypatch.delenv(FAULT_ENV)
    again = choose(VARIANTS, "auto", check_file)
    assert again.variant == measured.fastest and not again.cached  # its canary ran again, and passed


# -- what a passing canary measures ---------------------------------------------------------------


def test_a_passing_canary_lists_the_kernels_of_every_weight_type(measured):
    for name in measured.passing():
        types = measured.results[name].types
        assert list(types) == list(WEIGHT_TYPES), name
        assert set(types.values()) <= {"repacked", "plain", "none"}, (name, types)


def test_the_fastest_build_here_repacks_every_type_q4_k_m_included(measured):
    """Measured on this machine: with the build's repacked Q4_K patched to sum each row of a short
    batch as the single-token gemv does (installers/llama_patches/q4_K_8x8_columns.c), a short batch
    equals single tokens with repacked weights for every type, Q4_K_M included (unpatched, its
    repacked GEMM made it "plain")."""
    types = measured.results[measured.fastest].types
    assert {t: types[t] for t in ("F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K")} == dict.fromkeys(
        ("F16", "Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"), "repacked")
    choice = CpuChoice(measured.fastest, "", results={measured.fastest: measured.results[measured.fastest]})
    assert choice.kernels_for("Q8_0") == (True, True) and choice.kernels_for("Q4_K_M") == (True, True)


def test_a_verdict_maps_to_the_kernels_a_model_loads_with():
    results = {"b": CanaryResult("ok", "", types={"Q8_0": "repacked", "Q4_K_M": "plain", "IQ1_S": "none"})}
    choice = CpuChoice("b", "", results=results)
    assert [choice.kernels_for(t) for t in ("Q8_0", "Q4_K_M", "IQ1_S", "F32")] == \
        [(True, True), (False, True), (False, False), (False, True)]


# -- a real worker ----------------------------------------------------------------------------------


def start_worker(hearth_home: Path, **env: str) -> tuple[ProcessClient, p.Ready]:
    client = ProcessClient(env={"HEARTH_HOME": str(hearth_home), **env})
    try:
        return client, client.start(timeout=300)
    except BaseException:
        client.close(mode="abort", timeout=5)
        raise


def generate_a_few_tokens(client: ProcessClient, model: Path) -> p.Finished:
    client.load_model(str(model), timeout=300)
    command = p.Complete(request_id=new_request_id("cpu"), prompt="The capital of France is", max_tokens=4,
                         sampling=p.SamplingSpec(temperature=0))
    events = list(client.stream(command, timeout=300))
    (finished,) = [e for e in events if isinstance(e, p.Finished)]
    return finished


def test_a_worker_skips_a_build_whose_canary_crashes_and_generates(check_file, hearth_home, smollm2, measured):
    client, ready = start_worker(hearth_home, **{FAULT_ENV: f"canary:{measured.fastest}:SIGILL"})
    try:
        cpu = ready.cpu
        assert cpu.variant == measured.next_safer and not cpu.cached
        crashed = cpu.canaries[measured.fastest]
        assert (crashed.status, crashed.signal) == ("crashed", "SIGILL")
        assert cpu.canaries[measured.next_safer].status == "ok"
        finished = generate_a_few_tokens(client, smollm2)
        assert finished.finish_reason == "length" and len(finished.token_ids) == 4
    finally:
        client.close(mode="abort", timeout=5)

    client, ready = start_worker(hearth_home)  # no fault now: the next worker trusts the cache
    client.close(mode="abort", timeout=5)
    assert ready.cpu.variant == measured.next_safer and ready.cpu.cached
    assert ready.cpu.canaries[measured.fastest].signal == "SIGILL"


def test_hearth_cpu_variant_reaches_the_worker_unless_the_client_names_a_build(check_file, hearth_home, monkeypatch,
                                                                             measured):
    monkeypatch.setenv(VARIANT_ENV, "safe")
    client, ready = start_worker(hearth_home)
    client.close(mode="abort", timeout=5)
    assert ready.cpu.variant == VARIANTS.names[-1], "HEARTH_CPU_VARIANT=safe was ignored"

    client = ProcessClient(env={"HEARTH_HOME": str(hearth_home)})
    client.cpu_variant = measured.next_safer  # the GUI's retry with a chosen build
    try:
        ready = client.start(timeout=300)
    finally:
        client.close(mode="abort", timeout=5)
    assert ready.cpu.variant == measured.next_safer
