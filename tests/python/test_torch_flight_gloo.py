"""`ringx-trace why` and ringx-viewer on torch's own Flight Recorder dumps of gloo jobs, written
at test time by torch itself: fr_gloo_job.py runs 4 gloo ranks with a fault injected and each rank
dumps what torch recorded, as a pickle and as JSON. These dumps list no group's members, so the
report takes them from the dumps; it must name the group, the collective (seq, op, size) and the
ranks that did not reach it or called something else, in both forms, and the viewer's
collectives panel must name the same."""

import json
import os
import pickle
import re
import shutil
import subprocess
import sys

import pytest

from harness import RINGX_TRACE, VIEWER, viewer

JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fr_gloo_job.py")
FORMS = ("pickle", "json")

# Per case: lines the report must have, and verdicts no rank may get (how the ranks that reached
# the collective gave up on it depends on timing, whether torch had retired their entry).
EXPECTED = {
    # rank 3 issued no collective at all: an empty dump, yet a member of the default group
    "world": (["group '0 (default_pg)' (4 ranks, 4 dumped): all_reduce seq 1 (1.0 KiB, Float) "
               "did not finish on every rank",
               "  never arrived: rank 3",
               "  rank 3: never arrived (it started no collective in this group)"],
              ["called something else"]),
    "subgroup": (["group '1' (3 ranks, 3 dumped): all_reduce seq 3 (1.0 KiB, Float) did not "
                  "finish on every rank",
                  "  members: ranks 1-3 (the dumps list none: the ranks whose dumps name the "
                  "group)",
                  "  never arrived: rank 1",
                  "  rank 1 (process rank 2): never arrived (its last collective was "
                  "gloo:all_reduce seq 2, finished)",
                  "group '0 (default_pg)' (4 ranks, 4 dumped): every collective finished on "
                  "every rank that dumped (last seq 3)"],
                 ["called something else"]),
    "other_op": (["group '0 (default_pg)' (4 ranks, 4 dumped): all_reduce seq 4 (1.0 KiB, Float) "
                  "did not finish on every rank",
                  "  called something else: rank 1",
                  "  rank 1: called something else (all_gather 1.0 KiB Float)",
                  "  mismatch at seq 4: all_reduce 1.0 KiB Float (ranks 0, 2, 3); all_gather "
                  "1.0 KiB Float (rank 1)"],
                 ["never arrived"]),
    "two": (["group '0 (default_pg)' (4 ranks, 4 dumped): all_reduce seq 4 (1.0 KiB, Float) did "
             "not finish on every rank",
             "  never arrived: ranks 2, 3",
             "  rank 2: never arrived (its last collective was gloo:all_reduce seq 3, finished)",
             "  rank 3: never arrived (its last collective was gloo:all_reduce seq 3, finished)"],
            ["called something else"]),
}


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def job(request, tmp_path_factory):
    """(case, DIR) after the case's job ran: DIR/pickle and DIR/json hold every rank's dump."""
    case = request.param
    out = tmp_path_factory.mktemp(f"fr-gloo-{case}")
    # The job kills its own ranks after 180 s; this is for the job itself.
    done = subprocess.run([sys.executable, JOB, case, str(out)], timeout=300,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    for form in FORMS:
        assert len(os.listdir(out / form)) == 4, (form, os.listdir(out / form))
    return case, out


def why(path):
    done = subprocess.run([RINGX_TRACE, "why", str(path)], timeout=60, capture_output=True,
                          text=True)
    return done.returncode, done.stdout, done.stderr


def _load(path, form):
    with open(path, "rb") as f:
        return pickle.load(f) if form == "pickle" else json.load(f)


@pytest.mark.parametrize("form", FORMS)
def test_why_names_the_group_the_collective_and_the_ranks(job, form):
    case, out = job
    code, text, err = why(out / form)
    assert code == 0, err
    must, never = EXPECTED[case]
    lines = text.splitlines()
    head = "torch Flight Recorder (version 2.10, gloo): 4 of 4 ranks dumped"
    assert lines[0].startswith(head), text
    for line in must:
        assert line in lines, f"missing {line!r} in:\n{text}"
    # The culprit's group comes first.
    first = next(i for i, line in enumerate(lines) if line.startswith("group "))
    assert lines[first] == must[0], text
    for verdict in never:
        assert f"{verdict}:" not in text, text
    assert "warning" not in text + err


@pytest.mark.parametrize("form", FORMS)
def test_not_retired_counts_what_is_not_retired(job, form):
    case, out = job
    _, text, _ = why(out / form)
    for name in sorted(os.listdir(out / form)):
        rank = int(re.search(r"(\d+)(\.json)?$", name).group(1))
        entries = _load(out / form / name, form).get("entries", [])  # JSON: none when empty
        pending = sum(1 for e in entries if not e["retired"])
        counted = (f"{pending} ops not retired" if pending == len(entries)
                   else f"{pending} of {len(entries)} ops not retired")
        if not entries:
            counted = "nothing (no entries, no process group's status)"
        assert f"  rank {rank} dumped: {counted}" in text.splitlines(), (name, text)


@pytest.mark.parametrize("job", ["two"], indirect=True)
def test_a_cut_off_dump_is_named_and_its_rank_has_none(job, tmp_path):
    _, out = job
    for form in FORMS:
        cut = tmp_path / form
        shutil.copytree(out / form, cut)
        name = sorted(os.listdir(cut))[3]  # rank 3's
        data = (cut / name).read_bytes()
        (cut / name).write_bytes(data[: len(data) // 2])
        code, text, err = why(cut)
        assert code == 0, err
        assert f"warning: {cut / name}: " in text, text
        assert "no dump from rank 3" in text, text
        assert "  rank 3: no dump (wrote none" in text, text
        # Nothing readable at all: a clear error and exit status 1.
        alone = tmp_path / f"{form}-alone"
        alone.mkdir()
        shutil.copy(cut / name, alone / name)
        code, text, err = why(alone)
        assert code == 1 and text == "", text
        assert f"warning: {alone / name}: " in err and "no flight recorder dump in" in err, err


# The report's lines the viewer's collectives panel shows too: a title of a group that did not
# finish, its ranks by verdict, and the line of each rank the others wait on.
_PANEL_LINE = re.compile(r"group .* did not finish|  (never arrived|called something else|no dump"
                         r"|queued|stuck|failed): |  rank \d+( \(process rank \d+\))?: "
                         r"(never arrived|called something else|no dump)")


@pytest.mark.parametrize("form", FORMS)
def test_the_viewer_opens_the_dumps_and_names_what_why_names(job, form):
    if not os.path.exists(VIEWER):
        pytest.skip("ringx-viewer is not built")
    case, out = job
    result = viewer(out / form, "--panel", "collectives", "--frames", "3", "--size", "1280x720",
                    "--print-stats")
    assert result.returncode == 0, result.stderr
    stats = re.search(r"^ranks=(\d+) events=(\d+)", result.stdout, re.M)
    assert stats, result.stdout
    # Every rank, the one that issued nothing too; an event per entry of every dump.
    entries = sum(len(_load(out / form / name, form).get("entries", []))
                  for name in os.listdir(out / form))
    assert (int(stats.group(1)), int(stats.group(2))) == (4, entries), result.stdout
    shown = [line[len("hang: "):] for line in result.stdout.splitlines()
             if line.startswith("hang: ")]
    must, _ = EXPECTED[case]
    assert shown and shown[0] == must[0], result.stdout  # the culprit's group first
    for line in must:
        if _PANEL_LINE.match(line):
            assert line in shown, f"missing {line!r} in:\n{result.stdout}"
    # Nothing the report does not say.
    _, text, _ = why(out / form)
    for line in shown:
        assert line in text.splitlines(), f"{line!r} is not in the report:\n{text}"
