#!/usr/bin/env python3
"""Faults between two hosts, gloo beside ringx in one run: how long after the fault each
surviving rank gets its error, of which type, and whether it then shuts down cleanly.

    sudo PYTHONPATH=build/python .venv/bin/python bench/faults.py [--quick] [--docs]

Each job is two network-namespace "hosts" joined by a veth pair, one rank each, running
allreduces with a group timeout of 4 s (tests/python/netns_hosts.py, the same jobs the fault
tests run). The fault strikes mid-collective: the link goes down (a partition, no RST) on
either side, a rank is killed or stopped, or the store hangs before a rank is killed. For each
fault, size and backend the table gives, per surviving rank, the seconds from the fault to its
exception ("hang" if it had none within --exit-within s, and was killed), the exception's
type, whether destroy_process_group returned cleanly, and how many threads outlived the group.
The messages follow the table. Needs root (ip netns); prints why and exits 0 otherwise.
"""

import argparse
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "python"))
import netns_hosts  # noqa: E402  (tests/python is not a package)

import docs_table  # noqa: E402  (beside this file)

FAULTS = {
    "link down, store side": dict(cut="a"),
    "link down, far side": dict(cut="b"),
    "far rank SIGKILL": dict(signal_rank=1, sig=signal.SIGKILL),
    "far rank SIGSTOP": dict(signal_rank=1, sig=signal.SIGSTOP),
    "store's rank SIGKILL": dict(signal_rank=0, sig=signal.SIGKILL),
    "store hung, far rank SIGKILL": dict(separate_store=True, store_sig=signal.SIGSTOP,
                                         signal_rank=1, sig=signal.SIGKILL),
}
SIZES = {"1 KiB": 256, "32 MiB": 8 << 20}  # float32 elements
BACKENDS = ["gloo", "ringx"]


def run(fault, elements, backend, exit_within):
    """[(rank, cell text, message)] for the ranks that survived the fault."""
    options = dict(FAULTS[fault])
    stopped = options.get("signal_rank") if options.get("sig") == signal.SIGSTOP else None
    try:
        cut_at, reports = netns_hosts.run_job({"a": 1, "b": 1}, elements, backend=backend,
                                              exit_within=exit_within, **options)
    except netns_hosts.JobHung as e:
        return [("-", f"hang (> {exit_within:.0f} s)", str(e).splitlines()[0])]
    rows = []
    for report in reports:
        if report is None or report["rank"] == stopped:
            continue  # killed; or stopped, whose error comes only once it is continued
        if report["error_type"] is None:
            rows.append((report["rank"], "no error", ""))
            continue
        clean = "clean" if report["destroy_error"] is None else "destroy failed"
        cell = (f"{report['error_at'] - cut_at:5.2f} s {report['error_type']}, {clean}, "
                f"{len(report['threads_left'])} threads left")
        rows.append((report["rank"], cell, report["message"]))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one fault, one size")
    parser.add_argument("--exit-within", type=float, default=netns_hosts.TIMEOUT_S + 16,
                        help="seconds after the fault before a rank still running is a hang")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    if netns_hosts.bench_skipped("faults", args.docs):
        return
    if args.docs:
        docs_table.require("faults")
    with docs_table.table(args.docs, "faults"):
        table(args)


def table(args):
    faults = ["far rank SIGKILL"] if args.quick else list(FAULTS)
    sizes = ["1 KiB"] if args.quick else list(SIZES)
    print(f"group timeout {netns_hosts.TIMEOUT_S:.0f} s; time from the fault to each surviving "
          f"rank's exception")
    print(f"{'fault':30} {'size':7} {'backend':8} {'rank':5} result")
    messages = []
    for fault in faults:
        for size in sizes:
            for backend in BACKENDS:
                for rank, cell, message in run(fault, SIZES[size], backend, args.exit_within):
                    print(f"{fault:30} {size:7} {backend:8} {rank!s:5} {cell}", flush=True)
                    messages.append(f"- {fault}, {size}, {backend}, rank {rank}: {message}")
    print("\nmessages:")
    print("\n".join(messages))


if __name__ == "__main__":
    main()
