#!/usr/bin/env python3
"""ringx-viewer at scale: load time, frames per second and memory per event.

Generates Chrome Trace Event JSON files of 1M and 10M events (4 ranks x 3 lanes,
bench/make_viewer_trace.py; cached in build/bench-viewer/), starts one Xvfb
display, and runs ringx-viewer --print-stats at 1600x900 on each, fully zoomed out
and zoomed in to a few milliseconds, under Mesa's llvmpipe (software OpenGL, like CI).
The goal of issue 7: 1M events load in <= 2 s and draw at >= 30 fps both ways; 10M
events load and stay interactive.

    python3 bench/viewer.py [--sizes 1000000 10000000] [--frames 60]

Peak memory is the viewer process's max RSS (wait4); memory per event subtracts
the RSS of the same viewer with no trace.
"""

import argparse
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build"))
VIEWER = os.path.join(BUILD, "bin", "ringx-viewer")
STATS = re.compile(r"ranks=(\d+) events=(\d+) load_ms=(\d+) fps=([\d.]+)")


def start_display():
    for n in range(90, 140):
        if os.path.exists(f"/tmp/.X11-unix/X{n}"):
            continue
        xvfb = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", "1920x1080x24", "-nolisten", "tcp"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if os.path.exists(f"/tmp/.X11-unix/X{n}"):
                return xvfb, f":{n}"
            time.sleep(0.05)
        xvfb.kill()
    sys.exit("bench/viewer.py: could not start Xvfb (apt-get install xvfb)")


def measured(display, args):
    """Runs the viewer as a direct child so that its own peak RSS can be read."""
    env = dict(os.environ, DISPLAY=display)
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        out = os.open(args[0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(fd, 2)
        os.execve(VIEWER, [VIEWER, *args[1:], "--size", "1600x900", "--print-stats"], env)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"ringx-viewer failed: {os.waitstatus_to_exitcode(status)}")
    with open(args[0]) as f:
        m = STATS.search(f.read())
    stats = {"ranks": int(m.group(1)), "events": int(m.group(2)), "load_ms": int(m.group(3)),
             "fps": float(m.group(4))}
    return stats, usage.ru_maxrss * 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000000, 10000000])
    parser.add_argument("--frames", type=int, default=60)
    args = parser.parse_args()
    if not os.path.exists(VIEWER):
        sys.exit(f"{VIEWER} is missing: run `make` first")
    cache = os.path.join(BUILD, "bench-viewer")
    os.makedirs(cache, exist_ok=True)
    xvfb, display = start_display()
    out = os.path.join(cache, "stats.txt")
    try:
        _, empty_rss = measured(display, [out, "--frames", "5"])
        print(f"ringx-viewer at 1600x900 under Xvfb + llvmpipe, {args.frames} frames per figure; "
              f"an empty viewer holds {empty_rss / 2**20:.0f} MiB")
        print(f"{'events':>10} {'file':>9} {'load':>8} {'fps out':>8} {'fps in':>8} "
              f"{'peak RSS':>9} {'per event':>10}")
        for size in args.sizes:
            path = os.path.join(cache, f"trace-{size}.json")
            if not os.path.exists(path):
                subprocess.run([sys.executable, os.path.join(ROOT, "bench", "make_viewer_trace.py"),
                                "--events", str(size), "--ranks", "4", "--lanes", "3", "--out",
                                path], check=True, stdout=subprocess.DEVNULL)
            zoomed_out, rss = measured(display, [out, path, "--frames", str(args.frames)])
            # Zoomed in: 5 ms, one second into the trace.
            stats_in, _ = measured(display, [out, path, "--frames", str(args.frames), "--zoom",
                                             "1000:1005"])
            per_event = (rss - empty_rss) / max(zoomed_out["events"], 1)
            print(f"{zoomed_out['events']:>10} {os.path.getsize(path) / 2**20:>7.0f}MB "
                  f"{zoomed_out['load_ms'] / 1e3:>7.2f}s {zoomed_out['fps']:>8.1f} "
                  f"{stats_in['fps']:>8.1f} {rss / 2**20:>7.0f}MiB {per_event:>8.0f} B",
                  flush=True)
    finally:
        xvfb.kill()


if __name__ == "__main__":
    main()
