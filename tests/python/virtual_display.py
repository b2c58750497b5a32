"""A virtual X display of the project's own, for the viewer's tests, screenshots and benchmark.

Xvfb picks a free display number itself (-displayfd: it takes the first display whose lock it
can create, and says which once it accepts connections), so two displays started at once
never race for a number, and nothing else's clean-up stands between a viewer run and its exit
code. xvfb-run did both: it chose a number by looking for lock files (a race with every other
Xvfb starting beside it) and removed a temporary folder of its own after the program, exiting 5
and leaving its Xvfb running when that failed. One display serves a whole test session; it
is stopped when its owner is done, and dies with its owner if the owner is killed.

    with VirtualDisplay() as display:               # display.name is ":N"
        subprocess.run(cmd, env=display.env())
    session_display()                                # the test session's, started on first use
    python3 tests/python/virtual_display.py CMD ARGS...   # CMD under a display of its own,
                                                          # with CMD's exit code (ctest, demo)
"""

import atexit
import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SCREEN = "1920x1080x24"  # what the viewer's tests and screenshots are drawn at
START_TIMEOUT_S = 60.0  # llvmpipe's Xvfb starts in well under a second; a loaded machine is slower

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # In the child before exec: Xvfb gets SIGTERM when the process that started it ends, so a
    # killed test session leaves no X server behind.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class VirtualDisplay:
    def __init__(self, screen=SCREEN):
        self.screen = screen
        self.name = None
        self._xvfb = None
        self._log = None

    def start(self):
        if shutil.which("Xvfb") is None:
            raise RuntimeError("Xvfb is not installed: apt-get install xvfb (scripts/setup.sh "
                               "installs it)")
        read_end, write_end = os.pipe()
        self._log = tempfile.TemporaryFile()
        try:
            # -noreset: the server stays as it is when its last client leaves, between the runs
            # of a session, instead of resetting (and signalling) each time.
            self._xvfb = subprocess.Popen(
                ["Xvfb", "-displayfd", str(write_end), "-screen", "0", self.screen, "-nolisten",
                 "tcp", "-noreset"],
                pass_fds=(write_end,), stdin=subprocess.DEVNULL, stdout=self._log,
                stderr=self._log, preexec_fn=_die_with_parent)
        finally:
            os.close(write_end)
        try:
            number = self._read_number(read_end)
        finally:
            os.close(read_end)
        self.name = f":{number}"
        return self

    def _read_number(self, fd):
        text, deadline = b"", time.monotonic() + START_TIMEOUT_S
        while not text.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.stop()
                raise RuntimeError(f"Xvfb did not start within {START_TIMEOUT_S:.0f} s: "
                                   f"{self._output()}")
            chunk = os.read(fd, 64)
            if not chunk:  # Xvfb exited without a display
                code = self._xvfb.wait()
                raise RuntimeError(f"Xvfb exited ({code}) without a display: {self._output()}")
            text += chunk
        return int(text)

    def _output(self):
        self._log.seek(0)
        return self._log.read().decode(errors="replace").strip()[-2000:] or "(no output)"

    def env(self, base=None):
        """`base` (os.environ by default) with DISPLAY set to this display. XAUTHORITY goes:
        the server checks no cookie, and a stale one would only be sent along."""
        env = dict(os.environ if base is None else base, DISPLAY=self.name)
        env.pop("XAUTHORITY", None)
        return env

    def stop(self):
        if self._xvfb is not None and self._xvfb.poll() is None:
            self._xvfb.terminate()
            try:
                self._xvfb.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._xvfb.kill()
                self._xvfb.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


_session = None


def session_display():
    """The display this process's tests share: started on first use, stopped at exit."""
    global _session
    if _session is None:
        _session = VirtualDisplay().start()
        atexit.register(_session.stop)
    return _session


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with VirtualDisplay() as display:
        return subprocess.run(argv, env=display.env()).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
