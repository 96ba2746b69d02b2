"""Downloads with the real huggingface_hub client against a hub served on 127.0.0.1.

Every test talks HTTP to ``tests/fixtures/local_hub.py`` (hub + CDN, Range requests, the hub's
ETag / X-Linked-* / X-Repo-Commit headers) and writes a Hugging Face cache in ``tmp_path``.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download, try_to_load_from_cache

from model_store.downloads import (
    ChecksumMismatch,
    DownloadCancelled,
    DownloadError,
    HubOffline,
    NotEnoughSpace,
    UnsafeFilename,
    cached_file,
    delete_cached_file,
    download_file,
    remote_file_info,
)
from model_store.hub_transfer import CHUNK_BYTES
from tests.fixtures.local_hub import synthetic_bytes

pytest_plugins = ["tests.store.conftest_hub"]  # the hub, hf_cache and tiny_gguf_bytes fixtures

MIB = 1 << 20
REPO = "hearth-test/hybrid-tiny-GGUF"
GGUF_NAME = "hybrid-tiny-f32.gguf"
ROOT = Path(__file__).resolve().parents[2]
BIG = "big-q4.gguf"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def get(hub, cache, filename=GGUF_NAME, **kwargs):
    return download_file(REPO, filename, cache_dir=cache, endpoint=hub.url, **kwargs)


@pytest.fixture
def gguf(hub, tiny_gguf_bytes) -> bytes:
    hub.add_file(REPO, GGUF_NAME, tiny_gguf_bytes)
    return tiny_gguf_bytes


@pytest.fixture
def big(hub) -> bytes:
    data = synthetic_bytes(4 * MIB + 12345)
    hub.add_file(REPO, BIG, data)
    return data


# -- a download --------------------------------------------------------------------------------


def test_download_lands_in_the_hf_cache_verified_with_progress(hub, hf_cache, gguf):
    hub.throttle(4 * MIB)
    reports = []
    result = get(hub, hf_cache, on_progress=reports.append)

    commit = hub.commit(REPO)
    folder = hf_cache / "models--hearth-test--hybrid-tiny-GGUF"
    assert result.path == folder / "snapshots" / commit / GGUF_NAME
    assert os.readlink(result.path) == f"../../blobs/{sha256(gguf)}"
    assert (folder / "refs" / "main").read_text() == commit
    assert result.path.read_bytes() == gguf
    assert (result.sha256, result.size_bytes, result.commit) == (sha256(gguf), len(gguf), commit)
    assert result.transferred_bytes == len(gguf)
    assert not list((folder / "blobs").glob("*.incomplete"))

    done = [r.downloaded_bytes for r in reports]
    assert len(reports) >= 3 and done == sorted(done) and done[0] == 0 and done[-1] == len(gguf)
    assert {r.total_bytes for r in reports} == {len(gguf)} and {r.filename for r in reports} == {GGUF_NAME}
    assert reports[-1].eta_seconds == 0 and reports[-1].bytes_per_second > 0
    assert any(0 < r.downloaded_bytes < len(gguf) and r.eta_seconds > 0 for r in reports)


def test_other_tools_find_the_download_without_fetching_it_again(hub, hf_cache, gguf):
    result = get(hub, hf_cache)
    assert try_to_load_from_cache(REPO, GGUF_NAME, cache_dir=hf_cache) == str(result.path)
    again = hf_hub_download(REPO, GGUF_NAME, cache_dir=hf_cache, endpoint=hub.url)
    assert again == str(result.path)
    assert len(hub.body_gets(GGUF_NAME)) == 1


def test_a_cached_file_is_verified_not_fetched_again(hub, hf_cache, gguf):
    get(hub, hf_cache)
    reports = []
    second = get(hub, hf_cache, on_progress=reports.append)
    assert second.transferred_bytes == 0 and second.sha256 == sha256(gguf)
    assert len(hub.body_gets(GGUF_NAME)) == 1
    assert [r.downloaded_bytes for r in reports] == [len(gguf)]


def test_progress_is_reported_at_most_ten_times_a_second(hub, hf_cache):
    data = synthetic_bytes(6 * MIB, seed=3)
    hub.add_file(REPO, BIG, data)
    hub.throttle(8 * MIB)  # 24 chunks of 256 KiB over about 0.75 s
    stamps = []
    get(hub, hf_cache, BIG, on_progress=lambda report: stamps.append((time.monotonic(), report)))
    times = [t for t, _ in stamps]
    assert stamps[-1][1].downloaded_bytes == len(data)
    assert 4 <= len(stamps) < len(data) // CHUNK_BYTES
    assert all(later - earlier >= 0.09 for earlier, later in zip(times[:-2], times[1:-1]))
    speeds = [report.bytes_per_second for _, report in stamps[1:]]
    assert all(0 < speed < 12 * MIB for speed in speeds)  # the throttle holds it near 8 MiB/s


def test_a_small_git_file_is_checked_against_its_git_sha1(hub, hf_cache):
    config = json.dumps({"architectures": ["Qwen3_5ForCausalLM"]}).encode()
    hub.add_file(REPO, "config.json", config, lfs=False)
    result = get(hub, hf_cache, "config.json")
    assert result.path.read_bytes() == config and result.sha256 == sha256(config)
    assert remote_file_info(REPO, "config.json", endpoint=hub.url).sha256 is None

    hub.corrupt("config.json")
    delete_cached_file(REPO, "config.json", cache_dir=hf_cache)
    with pytest.raises(ChecksumMismatch):
        get(hub, hf_cache, "config.json")


def test_remote_file_info_reads_the_hub_headers(hub, gguf):
    info = remote_file_info(REPO, GGUF_NAME, endpoint=hub.url)
    assert (info.size_bytes, info.sha256, info.etag) == (len(gguf), sha256(gguf), sha256(gguf))
    assert info.commit == hub.commit(REPO) and info.url.startswith(hub.cdn_url)
    assert [r.method for r in hub.requests] == ["HEAD"]


def test_the_local_hub_serves_model_info_to_hfapi(hub, gguf):
    info = HfApi(endpoint=hub.url).model_info(REPO, files_metadata=True)
    (sibling,) = info.siblings
    assert (sibling.rfilename, sibling.size, sibling.lfs.sha256) == (GGUF_NAME, len(gguf), sha256(gguf))
    assert info.sha == hub.commit(REPO)


def test_missing_repository_or_file_is_a_clear_error(hub, hf_cache, gguf):
    with pytest.raises(DownloadError, match="no file nope.gguf") as missing_file:
        get(hub, hf_cache, "nope.gguf")
    with pytest.raises(DownloadError, match="no repository hearth-test/absent"):
        download_file("hearth-test/absent", GGUF_NAME, cache_dir=hf_cache, endpoint=hub.url)
    assert not isinstance(missing_file.value, HubOffline)


# -- interruptions -----------------------------------------------------------------------------


CUT = 2 * MIB + 5000
KEPT = CUT // CHUNK_BYTES * CHUNK_BYTES  # the chunk in flight when the connection drops is lost


def test_a_dropped_connection_is_resumed_within_the_call(hub, hf_cache, big):
    hub.cut_after(BIG, CUT)
    result = get(hub, hf_cache, BIG)
    assert result.sha256 == sha256(big) and result.path.read_bytes() == big
    first, second = hub.body_gets(BIG)
    assert first.body_bytes == CUT and first.range is None
    assert second.range == f"bytes={KEPT}-"
    assert result.transferred_bytes == len(big)


def test_an_interrupted_download_fails_clearly_and_the_next_call_resumes(hub, hf_cache, big):
    hub.cut_after(BIG, CUT, then_fail=1)  # connection dropped, then the hub is down
    with pytest.raises(DownloadError, match="try again to resume") as failed:
        get(hub, hf_cache, BIG)
    assert type(failed.value) is DownloadError and "HTTP 503" in str(failed.value)
    (partial,) = hf_cache.rglob("*.incomplete")
    assert 0 < KEPT == partial.stat().st_size and partial.read_bytes() == big[:KEPT]

    result = get(hub, hf_cache, BIG)
    assert result.transferred_bytes == len(big) - KEPT < result.size_bytes
    assert result.sha256 == sha256(big) and result.path.read_bytes() == big
    last = hub.body_gets(BIG)[-1]
    assert last.range == f"bytes={KEPT}-" and last.status == 206
    assert last.body_bytes == len(big) - KEPT
    assert not partial.exists()


def test_a_server_that_ignores_range_gets_a_clean_full_download(hub, hf_cache, big):
    hub.cut_after(BIG, CUT, then_fail=1)
    with pytest.raises(DownloadError):
        get(hub, hf_cache, BIG)
    hub.ignore_range()
    result = get(hub, hf_cache, BIG)
    assert result.path.read_bytes() == big and result.transferred_bytes == len(big)
    last = hub.body_gets(BIG)[-1]
    assert last.range == f"bytes={KEPT}-" and last.status == 200


def test_cancel_stops_promptly_keeps_the_part_and_the_next_call_resumes(hub, hf_cache, big):
    hub.throttle(4 * MIB)  # the whole file would take about a second
    cancel = threading.Event()
    cancelled_at = []
    timer = threading.Timer(0.4, lambda: (cancelled_at.append(time.monotonic()), cancel.set()))

    armed = []

    def started(progress) -> None:  # the Cancel press comes once bytes flow, however busy the machine
        if progress.downloaded_bytes > 0 and not armed:
            armed.append(True)
            timer.start()  # another thread, as the GUI's Cancel button is

    with pytest.raises(DownloadCancelled, match="resumes") as cancelled:
        get(hub, hf_cache, BIG, cancel=cancel, on_progress=started)
    stopped = time.monotonic()
    timer.join()
    assert stopped - cancelled_at[0] < 1.0
    kept = cancelled.value.kept_bytes
    (partial,) = hf_cache.rglob("*.incomplete")
    assert 0 < kept < len(big) and partial.stat().st_size == kept
    assert partial.read_bytes() == big[:kept]

    hub.throttle(None)
    result = get(hub, hf_cache, BIG)
    assert result.transferred_bytes == len(big) - kept and result.sha256 == sha256(big)
    assert hub.body_gets(BIG)[-1].range == f"bytes={kept}-"


def test_a_second_download_of_the_same_file_is_refused_while_one_runs(hub, hf_cache, big):
    hub.throttle(2 * MIB)
    cancel, outcome = threading.Event(), []

    def first():
        try:
            get(hub, hf_cache, BIG, cancel=cancel)
        except DownloadError as error:
            outcome.append(error)

    worker = threading.Thread(target=first)
    worker.start()
    deadline = time.monotonic() + 5
    while not hub.body_gets(BIG) and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(DownloadError, match="already being downloaded"):
        get(hub, hf_cache, BIG)
    cancel.set()
    worker.join(5)
    assert [type(e) for e in outcome] == [DownloadCancelled]
    assert len(hub.body_gets(BIG)) == 1


def test_cancel_before_start_transfers_nothing(hub, hf_cache, big):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(DownloadCancelled):
        get(hub, hf_cache, BIG, cancel=cancel)
    assert hub.body_gets(BIG) == []


# -- refusals ----------------------------------------------------------------------------------


def test_corrupted_bytes_are_rejected_and_deleted(hub, hf_cache, gguf):
    hub.corrupt(GGUF_NAME)
    with pytest.raises(ChecksumMismatch, match="deleted") as mismatch:
        get(hub, hf_cache)
    assert mismatch.value.expected == sha256(gguf) != mismatch.value.actual
    assert [p for p in hf_cache.rglob("*") if p.is_file() and ".locks" not in p.parts] == []
    assert cached_file(REPO, GGUF_NAME, cache_dir=hf_cache) is None


def test_a_damaged_blob_already_in_the_cache_is_deleted(hub, hf_cache, gguf):
    result = get(hub, hf_cache)
    blob = result.path.resolve()
    blob.write_bytes(b"x" * len(gguf))
    with pytest.raises(ChecksumMismatch):
        get(hub, hf_cache)
    assert not blob.exists() and not result.path.is_symlink()
    assert get(hub, hf_cache).path.read_bytes() == gguf


def test_the_catalogue_checksum_must_match_the_hub(hub, hf_cache, gguf):
    with pytest.raises(DownloadError, match="not the file the catalogue names"):
        get(hub, hf_cache, expected_sha256="0" * 64)
    assert hub.body_gets(GGUF_NAME) == []
    assert get(hub, hf_cache, expected_sha256=sha256(gguf).upper()).sha256 == sha256(gguf)


def test_not_enough_disk_space_fails_before_any_transfer(hub, hf_cache, gguf):
    asked = []

    def free_space(folder: Path) -> int:
        asked.append(folder)
        return len(gguf) + 100 * MIB - 1

    with pytest.raises(NotEnoughSpace) as no_room:
        get(hub, hf_cache, margin_bytes=100 * MIB, free_space=free_space)
    message = str(no_room.value)
    assert f"{(len(gguf) + 100 * MIB) / MIB:.1f} MiB" in message and str(hf_cache) in message
    assert no_room.value.needed_bytes == len(gguf) + 100 * MIB
    assert asked and all(folder.exists() for folder in asked)
    assert hub.body_gets(GGUF_NAME) == []


def test_space_already_downloaded_is_not_asked_for_again(hub, hf_cache, big):
    hub.cut_after(BIG, CUT, then_fail=1)
    with pytest.raises(DownloadError):
        get(hub, hf_cache, BIG)
    exactly_enough = len(big) - KEPT + 10 * MIB
    with pytest.raises(NotEnoughSpace):
        get(hub, hf_cache, BIG, margin_bytes=10 * MIB, free_space=lambda _: exactly_enough - 1)
    result = get(hub, hf_cache, BIG, margin_bytes=10 * MIB, free_space=lambda _: exactly_enough)
    assert result.transferred_bytes == len(big) - KEPT


@pytest.mark.parametrize("name", ["../x.gguf", "/etc/passwd", "a/../../b", "a\\b", "", "a//b", "./a", "C:x"])
def test_unsafe_file_names_are_refused_before_any_request(hub, hf_cache, name):
    for call in (
        lambda: download_file(REPO, name, cache_dir=hf_cache, endpoint=hub.url),
        lambda: remote_file_info(REPO, name, endpoint=hub.url),
        lambda: cached_file(REPO, name, cache_dir=hf_cache),
        lambda: delete_cached_file(REPO, name, cache_dir=hf_cache),
    ):
        with pytest.raises(UnsafeFilename):
            call()
    assert hub.requests == [] and not hf_cache.exists()


@pytest.mark.parametrize("repo_id", ["../evil", "org/../x", "a/b/c"])
def test_unsafe_repository_ids_are_refused(hub, hf_cache, repo_id):
    with pytest.raises(UnsafeFilename):
        download_file(repo_id, GGUF_NAME, cache_dir=hf_cache, endpoint=hub.url)
    assert hub.requests == []


# -- offline -----------------------------------------------------------------------------------


def test_offline_mode_refuses_downloads_without_a_request(hub, hf_cache, gguf, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubOffline, match="downloads need an internet connection; installed models"):
        get(hub, hf_cache)
    assert hub.requests == []


def test_no_server_is_offline_at_once(hf_cache):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed when the block ends
    started = time.monotonic()
    with pytest.raises(HubOffline, match="no connection"):
        download_file(REPO, GGUF_NAME, cache_dir=hf_cache, endpoint=dead)
    assert time.monotonic() - started < 3


def test_a_hub_that_does_not_answer_is_offline_after_the_timeout(hub, hf_cache, gguf):
    hub.hang()
    started = time.monotonic()
    with pytest.raises(HubOffline, match="no answer in time"):
        get(hub, hf_cache, timeout=0.5)
    assert time.monotonic() - started < 3


def test_hf_home_is_respected_and_offline_mode_set_before_import_works(hub, tmp_path, gguf):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf-home"), "HF_ENDPOINT": hub.url}
    env.pop("HF_HUB_CACHE", None)
    script = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from model_store import downloads as d\n"
        "print(d.cached_file(sys.argv[2], sys.argv[3]))\n"
        "if sys.argv[4] == 'online': print(d.download_file(sys.argv[2], sys.argv[3]).path)\n"
        "t = time.monotonic()\n"
        "try: d.download_file(sys.argv[2], sys.argv[3])\n"
        "except d.HubOffline as e: print('offline', round(time.monotonic() - t, 1))\n"
    )

    def run(mode, **extra):
        args = [sys.executable, "-c", script, str(ROOT), REPO, GGUF_NAME, mode]
        done = subprocess.run(args, env=env | extra, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    online = run("online")
    path = Path(online[1])
    assert online[0] == "None" and path.is_relative_to(tmp_path / "hf-home" / "hub")
    assert path.read_bytes() == gguf and len(online) == 2

    seen = len(hub.requests)
    cached, offline = run("offline", HF_HUB_OFFLINE="1")
    assert cached == str(path) and offline.startswith("offline") and float(offline.split()[1]) < 2
    assert len(hub.requests) == seen


# -- the cache ---------------------------------------------------------------------------------


def test_cached_file_and_delete_cached_file(hub, hf_cache, gguf):
    assert cached_file(REPO, GGUF_NAME, cache_dir=hf_cache) is None
    assert delete_cached_file(REPO, GGUF_NAME, cache_dir=hf_cache) == 0

    first = get(hub, hf_cache)
    assert cached_file(REPO, GGUF_NAME, cache_dir=hf_cache) == first.path
    assert cached_file(REPO, GGUF_NAME, revision=first.commit, cache_dir=hf_cache) == first.path

    hub.add_file(REPO, "README.md", b"# a new commit\n", lfs=False)
    second = get(hub, hf_cache)  # main moved: same blob, a second snapshot link
    assert second.commit != first.commit and second.transferred_bytes == 0
    assert cached_file(REPO, GGUF_NAME, cache_dir=hf_cache) == second.path

    blob = first.path.resolve()
    assert delete_cached_file(REPO, GGUF_NAME, cache_dir=hf_cache) == 0  # still linked from first
    assert blob.exists() and not second.path.is_symlink()
    assert cached_file(REPO, GGUF_NAME, cache_dir=hf_cache) is None
    assert delete_cached_file(REPO, GGUF_NAME, revision=first.commit, cache_dir=hf_cache) == len(gguf)
    assert not blob.exists()
    assert cached_file(REPO, GGUF_NAME, revision=first.commit, cache_dir=hf_cache) is None
