"""ringx-viewer as a user runs it, on a real job's trace: a recorded directory, its
Chrome export, a file cut off by a crash, input that is not a trace, and live attach
to a running job. On the session's own Xvfb (virtual_display.py), with llvmpipe's OpenGL."""

import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

import pytest

from harness import BIN, PYTHONPATH, VIEWER, free_port, viewer

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
STATS = re.compile(r"^ranks=(\d+) events=(\d+) load_ms=(\d+) fps=([\d.]+)$", re.M)
FLOWS = re.compile(r"^span_ms=[\d.]+ flows=(\d+) ", re.M)
LANES = re.compile(r" lanes=(\d+) indexed=(\d)$", re.M)
SEARCH = re.compile(r"^search_matches=(\d+) current=(\d+)$", re.M)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def record_job(trace_dir, steps=6):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH)
    env.pop("RANK", None)
    result = subprocess.run([sys.executable, os.path.join(ROOT, "samples", "train_ddp.py"),
                             "--world-size", "2", "--steps", str(steps), "--trace", str(trace_dir)],
                            capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def job_trace(tmp_path_factory):
    trace = tmp_path_factory.mktemp("viewer") / "trace"
    record_job(trace)
    return trace


def test_opens_a_recorded_job_renders_a_screenshot_and_prints_stats(job_trace, tmp_path):
    shot = tmp_path / "ddp.png"
    result = viewer(str(job_trace), "--panel", "ddp", "--frames", "5", "--size", "1280x720",
                    "--screenshot", str(shot), "--print-stats")
    assert result.returncode == 0, result.stderr
    match = STATS.search(result.stdout)
    assert match, result.stdout
    assert int(match.group(1)) == 2
    assert int(match.group(2)) > 100  # collectives, buckets, phases, counters
    assert float(match.group(4)) > 0
    assert png_size(shot) == (1280, 720)


def test_opens_the_same_job_from_its_chrome_export(job_trace, tmp_path):
    exported = tmp_path / "job.json"
    export = subprocess.run([os.path.join(BIN, "ringx-trace"), "export", str(job_trace), "-o",
                             str(exported)], capture_output=True, text=True, timeout=60)
    assert export.returncode == 0, export.stderr
    direct_run = viewer(str(job_trace), "--frames", "2", "--print-stats")
    direct = STATS.search(direct_run.stdout)
    result = viewer(str(exported), "--frames", "2", "--print-stats")
    assert result.returncode == 0, result.stderr
    via_json = STATS.search(result.stdout)
    assert via_json, result.stdout
    assert via_json.group(1) == "2"
    assert via_json.group(2) == direct.group(2)  # every event made the round trip
    # Each collective's arrow across the ranks too: the export's flow events.
    flows = int(FLOWS.search(direct_run.stdout).group(1))
    assert flows > 0, direct_run.stdout
    assert int(FLOWS.search(result.stdout).group(1)) == flows, result.stdout


def test_search_goes_to_the_first_match(job_trace, tmp_path):
    result = viewer(str(job_trace), "--frames", "2", "--print-stats", "--search", "allreduce",
                    "--screenshot", str(tmp_path / "search.png"))
    assert result.returncode == 0, result.stderr
    match = SEARCH.search(result.stdout)
    assert match and int(match.group(1)) > 0 and match.group(2) == "1", result.stdout
    nothing = SEARCH.search(viewer(str(job_trace), "--frames", "1", "--print-stats", "--search",
                                   "no such event").stdout)
    assert nothing and nothing.group(1) == "0" and nothing.group(2) == "0"


VIEW = re.compile(r"^view_ms=([\d.]+):([\d.]+) items=(\d+)$", re.M)


def test_zooms_to_what_the_trace_holds_and_never_writes_an_empty_screenshot(job_trace, tmp_path):
    """--zoom-steps and --zoom-event pick the view from the trace's own events, whenever the run
    reached them; a screenshot whose timeline would show no event is refused (exit 1, no file),
    so a fixed --zoom that a run's timing moved away from fails instead of an empty picture."""
    steps = viewer(str(job_trace), "--frames", "2", "--print-stats", "--zoom-steps", "2:3",
                   "--screenshot", str(tmp_path / "steps.png"))
    assert steps.returncode == 0, steps.stderr
    view = VIEW.search(steps.stdout)
    assert view and int(view.group(3)) > 0, steps.stdout
    span = float(re.search(r"^span_ms=([\d.]+)", steps.stdout, re.M).group(1))
    assert 0 <= float(view.group(1)) < float(view.group(2)) <= span * 1.05, steps.stdout
    assert png_size(tmp_path / "steps.png")[0] > 0
    event = viewer(str(job_trace), "--frames", "2", "--print-stats", "--zoom-event", "backward")
    assert event.returncode == 0 and int(VIEW.search(event.stdout).group(3)) > 0, event.stdout

    empty = tmp_path / "empty.png"
    far = viewer(str(job_trace), "--frames", "2", "--zoom", "100000:100001", "--screenshot",
                 str(empty))
    assert far.returncode == 1
    assert "the timeline shows no event" in far.stderr and "--zoom-steps" in far.stderr, far.stderr
    assert not empty.exists()
    missing = viewer(str(job_trace), "--frames", "2", "--zoom-steps", "900:901")
    assert missing.returncode == 1 and "no event of those steps" in missing.stderr, missing.stderr


AREA = re.compile(r"^area_tracks=(\d+) area_rows=(\d+) area_ms=([\d.]+)$", re.M)


def test_area_from_the_command_line_selects_the_ranks_tracks(job_trace):
    """--area RANKS selects every track of those ranks over the view (here steps 2-3) and shows
    the area's statistics; a rank the trace lacks is an error saying so."""
    both = viewer(str(job_trace), "--frames", "2", "--print-stats", "--area", "0-1",
                  "--zoom-steps", "2:3")
    one = viewer(str(job_trace), "--frames", "2", "--print-stats", "--area", "1",
                 "--zoom-steps", "2:3")
    assert both.returncode == 0 and one.returncode == 0, both.stderr + one.stderr
    both_area, one_area = AREA.search(both.stdout), AREA.search(one.stdout)
    assert both_area and one_area, both.stdout + one.stdout
    assert int(both_area.group(1)) > int(one_area.group(1)) > 0
    assert int(one_area.group(2)) > 0  # rows: the names of rank 1's events in those steps
    missing = viewer(str(job_trace), "--frames", "1", "--area", "7")
    assert missing.returncode == 1 and "the trace has no rank 7" in missing.stderr, missing.stderr


def cut_inside_a_record(data, near):
    """An offset strictly inside the first record that starts at or after `near`.

    A fixed fraction of the file lands on a record boundary now and then, and a
    stream cut there reads as complete; walking the framing (8-byte magic, then
    u32 little-endian length of type + payload, type, payload) never does.
    """
    offset = 8
    while offset + 4 <= len(data):
        length = int.from_bytes(data[offset:offset + 4], "little")
        if offset >= near and length > 1:
            return offset + 4 + 1 + (length - 1) // 2  # past the type byte, inside the payload
        offset += 4 + length
    raise AssertionError(f"no record with a payload after byte {near} of {len(data)}")


def test_a_file_cut_off_by_a_crash_still_opens(job_trace, tmp_path):
    cut = tmp_path / "cut"
    shutil.copytree(job_trace, cut)
    os.remove(cut / "manifest.json")
    rank1 = cut / "rank-1.ringx"
    data = rank1.read_bytes()
    rank1.write_bytes(data[: cut_inside_a_record(data, len(data) * 2 // 3)])
    result = viewer(str(cut), "--frames", "2", "--print-stats")
    assert result.returncode == 0, result.stderr
    assert STATS.search(result.stdout).group(1) == "2"
    assert "cut off" in result.stderr or "truncated" in result.stderr, result.stderr


@pytest.mark.parametrize("content", [b"RINGXT\n\x1a" + os.urandom(4000), b"{\"traceEvents\": [{\"ph\":",
                                     b"plain text, not a trace\n"])
def test_input_that_is_not_a_trace_is_a_clear_error_not_a_crash(tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    result = viewer(str(bad), "--frames", "1")
    assert result.returncode == 1, (result.returncode, result.stderr)  # not a signal
    assert "ringx-viewer: error:" in result.stderr and "bad.json" in result.stderr, result.stderr


def test_missing_input_and_bad_options_say_what_is_wrong(tmp_path):
    result = viewer(str(tmp_path / "nope"), "--frames", "1")
    assert result.returncode == 1 and "nope" in result.stderr, result.stderr
    result = viewer("--panel", "gpu")
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ringx-viewer: --panel: expects one of stats"), result.stderr
    result = viewer("--zoom", "5:1", str(tmp_path))
    assert result.returncode == 2 and "END_MS must be after BEGIN_MS" in result.stderr
    result = viewer("--save", str(tmp_path))
    assert result.returncode == 2 and "--save requires --attach" in result.stderr
    result = viewer("--diff", str(tmp_path))
    assert result.returncode == 2 and "--diff" in result.stderr, result.stderr
    result = viewer("--diff-row", "1", str(tmp_path))
    assert result.returncode == 2 and "--diff-row requires --diff" in result.stderr, result.stderr
    result = viewer("--diff", str(tmp_path / "nope"), str(tmp_path), "--frames", "1")
    assert result.returncode == 1, result.stderr
    assert f"run A of --diff ({tmp_path / 'nope'})" in result.stderr, result.stderr


def test_help_lists_every_option():
    """One parser (CLI11) for ringx-viewer, ringx-trace and the C++ samples: --help is complete."""
    result = subprocess.run([VIEWER, "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    for option in ("--attach", "--token", "--save", "--panel", "--zoom", "--search",
                   "--follow-seconds", "--size", "--frames", "--seconds", "--screenshot",
                   "--print-stats", "--diff", "--diff-row", "--ranks", "--expand",
                   "--index-above", "RINGX_TRACE_TOKEN"):
        assert option in result.stdout, (option, result.stdout)


def test_attaches_to_a_running_job_and_saves_what_it_received(tmp_path):
    port = free_port()
    env = dict(os.environ, PYTHONPATH=PYTHONPATH, RINGX_TRACE_LISTEN=f"127.0.0.1:{port}")
    env.pop("RANK", None)
    job = subprocess.Popen([sys.executable, os.path.join(ROOT, "samples", "train_ddp.py"),
                            "--world-size", "2", "--steps", "100000"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        # Attach once both ranks are training (rank 0 prints step 0 after the first step), so
        # the viewer's 12 s see steps however long torch's import and the rendezvous take that
        # day; a reader thread keeps draining the job's output so it never blocks on a full pipe.
        training = threading.Event()

        def drain():
            for line in job.stdout:
                if line.startswith("step"):
                    training.set()

        threading.Thread(target=drain, daemon=True).start()
        deadline = time.monotonic() + 300
        while not training.wait(1):
            assert job.poll() is None, "the job exited: " + job.stderr.read()
            assert time.monotonic() < deadline, "the job printed no step in 300 s"
        saved = tmp_path / "received"
        result = viewer("--attach", f"127.0.0.1:{port}", "--seconds", "12", "--panel", "live",
                        "--screenshot", str(tmp_path / "live.png"), "--print-stats",
                        "--save", str(saved), timeout=120)
        assert result.returncode == 0, result.stderr
        match = STATS.search(result.stdout)
        assert match and match.group(1) == "2", result.stdout + result.stderr
        assert int(match.group(2)) > 50
        assert (saved / "rank-0.ringx").exists() and (saved / "rank-1.ringx").exists()
        # What was saved opens like any recorded trace.
        again = STATS.search(viewer(str(saved), "--frames", "1", "--print-stats").stdout)
        assert again and again.group(1) == "2" and int(again.group(2)) >= int(match.group(2))
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)


def test_a_64_rank_trace_opens_as_host_lanes_whole_or_as_an_index(tmp_path, monkeypatch):
    """Above 32 ranks the timeline shows a lane per host; --index-above 0 opens the trace as
    an index (the lanes from one pass over the files, ranks loaded when a lane expands),
    saved as an index file that the next open reads."""
    monkeypatch.setenv("RINGX_VIEWER_CACHE_DIR", str(tmp_path / "cache"))
    trace = tmp_path / "job"
    subprocess.run([os.path.join(BIN, "bench_make_scale_trace"), "--out", str(trace), "--ranks",
                    "64", "--events", "200000", "--ranks-per-host", "8"], check=True,
                   capture_output=True, timeout=120)
    whole = viewer(str(trace), "--frames", "3", "--print-stats")
    assert whole.returncode == 0, whole.stderr
    assert STATS.search(whole.stdout).group(1) == "64", whole.stdout
    assert LANES.search(whole.stdout).groups() == ("8", "0"), whole.stdout
    shot = tmp_path / "index.png"
    index = viewer(str(trace), "--frames", "3", "--print-stats", "--index-above", "0",
                   "--expand", "node3", "--screenshot", str(shot))
    assert index.returncode == 0, index.stderr
    assert LANES.search(index.stdout).groups() == ("8", "1"), index.stdout
    # Every event is counted, though only what a lane shows is held.
    assert STATS.search(index.stdout).group(2) == STATS.search(whole.stdout).group(2)
    assert png_size(shot) == (1600, 900)
    assert len(list((tmp_path / "cache").glob("index-*.bin"))) == 1
    again = viewer(str(trace), "--frames", "3", "--print-stats", "--index-above", "0")
    assert again.returncode == 0, again.stderr
    assert STATS.search(again.stdout).group(2) == STATS.search(whole.stdout).group(2)
