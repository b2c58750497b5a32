"""The tests' own virtual display (virtual_display.py): displays started at once never share a
number, a program's exit code comes through as it is, and no X server outlives its owner."""

import os
import signal
import subprocess
import sys
import time

from virtual_display import VirtualDisplay

HERE = os.path.dirname(os.path.abspath(__file__))


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False


def test_displays_started_together_each_get_their_own_number_and_stop_with_their_owner():
    displays = [VirtualDisplay() for _ in range(4)]
    try:
        for display in displays:
            display.start()
        names = [display.name for display in displays]
        assert len(set(names)) == 4, names
        pids = [display._xvfb.pid for display in displays]
        assert all(alive(pid) for pid in pids)
        for display in displays:
            assert os.path.exists(f"/tmp/.X11-unix/X{display.name[1:]}")
    finally:
        for display in displays:
            display.stop()
    assert not any(alive(pid) for pid in pids)


def test_a_program_exit_code_comes_through_unchanged_many_at_once():
    """xvfb-run exited 5 ("problem while cleaning up temporary directory") in place of its
    program's 1, and left its Xvfb running; eight of these at once each give their own code."""
    runs = [subprocess.Popen([sys.executable, os.path.join(HERE, "virtual_display.py"), "sh", "-c",
                              f'[ -n "$DISPLAY" ] && exit {code}', ], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
            for code in (0, 1, 3, 1, 0, 1, 7, 1)]
    codes = [run.wait(timeout=120) for run in runs]
    assert codes == [0, 1, 3, 1, 0, 1, 7, 1], [run.stderr.read() for run in runs]


def test_a_killed_owner_takes_its_x_server_with_it(tmp_path):
    pid_file = tmp_path / "xvfb.pid"
    owner = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, sys.argv[1]);"
        "from virtual_display import VirtualDisplay;"
        "d = VirtualDisplay().start(); open(sys.argv[2], 'w').write(str(d._xvfb.pid));"
        "time.sleep(600)"), HERE, str(pid_file)])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text():
            assert owner.poll() is None and time.monotonic() < deadline, "no display started"
            time.sleep(0.05)
        xvfb = int(pid_file.read_text())
        assert alive(xvfb)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 30
    while alive(xvfb) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(xvfb), "Xvfb outlived the process that started it"
