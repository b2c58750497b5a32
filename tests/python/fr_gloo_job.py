"""A 4-rank gloo job with a fault injected, whose ranks write torch's own Flight Recorder dumps:
what test_torch_flight_gloo.py runs `ringx-trace why` on.

    python fr_gloo_job.py CASE OUT_DIR

torch 2.13 records gloo's collectives in its Flight Recorder (TORCH_FR_BUFFER_SIZE entries,
2000 unless set; this job sets 200), but nothing writes a dump for gloo: a gloo timeout writes no
file, TORCH_FR_DUMP_TEMP_FILE set or not (only ProcessGroupNCCL's watchdog calls that writer).
A gloo job dumps from its own code, as each rank here does after its collective timed out (or
after it skipped it):
torch._C._distributed_c10d._dump_fr_trace() (a pickle) and _dump_fr_trace_json() (JSON), written
to OUT_DIR/pickle/fr_trace_rank_<N> and OUT_DIR/json/fr_trace_rank_<N>.json (the rank is in the
name: the dumps do not carry it).

CASE:
  world     rank 3 never calls the world's first all_reduce (its dump has no entries and an
            empty pg_status)
  subgroup  group [1, 2, 3]: its rank 2 never calls the group's 3rd all_reduce (rank 0, not a
            member, runs the world's 3 collectives only)
  other_op  rank 1 calls all_gather where the others call their 4th all_reduce
  two       ranks 2 and 3 never call the world's 4th all_reduce

Every rank is a process forked from this one (torch imported once); the collective that
meets the fault has a 1.5 s timeout, the rest the group's 90 s. The job ends within 180 s
whatever happens: a rank still running then is killed, and the job exits 1.
"""

import datetime
import json
import multiprocessing
import os
import sys
import time

os.environ["TORCH_FR_BUFFER_SIZE"] = "200"

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch._C._distributed_c10d import (  # noqa: E402
    AllgatherOptions,
    AllreduceOptions,
    _dump_fr_trace,
    _dump_fr_trace_json,
)

WORLD = 4
SUBGROUP = [1, 2, 3]
FAULT_TIMEOUT = datetime.timedelta(milliseconds=1500)
JOB_SECONDS = 180  # generous: a machine busy with other work must not fail the job
WAIT = datetime.timedelta(seconds=90)  # the group's timeout and the store waits'
CASES = ("world", "subgroup", "other_op", "two")


def dump(out_dir, rank):
    with open(os.path.join(out_dir, "pickle", f"fr_trace_rank_{rank}"), "wb") as f:
        f.write(_dump_fr_trace())
    with open(os.path.join(out_dir, "json", f"fr_trace_rank_{rank}.json"), "wb") as f:
        f.write(_dump_fr_trace_json())


def all_reduce(tensor, group, timeout=None):
    opts = AllreduceOptions()
    if timeout is not None:
        opts.timeout = timeout
    group.allreduce([tensor], opts).wait()


def all_gather(tensor, group, timeout):
    opts = AllgatherOptions()
    opts.timeout = timeout
    out = [torch.empty_like(tensor) for _ in range(group.size())]
    group.allgather([out], [tensor], opts).wait()


def settled(dump):
    """Whether torch has retired every entry this rank recorded: gloo's wait() returns before
    its worker thread does, so a dump taken at once could show the last collective before the
    fault still pending. pg_status is no sign: gloo's two worker threads each write
    last_completed_collective as they finish, so it can stay below a seq already retired."""
    return not any(not e["retired"] for e in dump.get("entries", []))


def settle():
    """Waits until torch's record of this rank's finished collectives is whole (settled), so
    that a dump after the fault differs from it only by the fault. Polled, for at most 60 s."""
    deadline = time.monotonic() + 60
    while not settled(dump := json.loads(_dump_fr_trace_json())):
        if time.monotonic() > deadline:
            unretired = [(e["pg_id"], e["collective_seq_id"]) for e in dump.get("entries", [])
                         if not e["retired"]]
            raise TimeoutError("torch did not retire this rank's finished collectives in 60 s: "
                               f"{unretired} (pg_id, seq) not retired")
        time.sleep(0.01)


def rank_main(case, rank, out_dir, store):
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD,
                            timeout=WAIT)
    world = dist.distributed_c10d._get_default_group()
    subgroup = dist.new_group(SUBGROUP)  # every rank calls new_group, members or not
    x = torch.ones(256)  # 1 KiB of float32
    for _ in range(0 if case == "world" else 3):
        all_reduce(x, world)
    if case == "subgroup" and rank in SUBGROUP:
        for _ in range(2):
            all_reduce(x, subgroup)
    settle()
    # Every rank is here before the fault, so the short timeout waits only for the ranks that
    # skip the collective, however slowly the machine got everyone this far.
    store.set(f"ready{rank}", "1")
    store.wait([f"ready{r}" for r in range(WORLD)], WAIT)
    skips = {"world": rank == 3, "subgroup": rank == 2, "other_op": False,
             "two": rank in (2, 3)}[case]
    try:
        if skips:
            pass  # busy elsewhere: what it holds is what it dumps, whenever it does
        elif case == "subgroup":
            if rank in SUBGROUP:
                all_reduce(x, subgroup, FAULT_TIMEOUT)
        elif case == "other_op" and rank == 1:
            all_gather(x, world, FAULT_TIMEOUT)
        else:
            all_reduce(x, world, FAULT_TIMEOUT)
    except RuntimeError as e:
        print(f"rank {rank}: {str(e).splitlines()[0]}", flush=True)
    dump(out_dir, rank)


def rank_process(case, rank, out_dir, rendezvous):
    store = dist.FileStore(rendezvous, WORLD)
    try:
        rank_main(case, rank, out_dir, store)
        code = 0
    except BaseException as e:  # noqa: BLE001  the job's exit status says a rank failed
        print(f"rank {rank} failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        code = 1
    # Every rank stays until all have dumped, so that one that skipped the collective keeps its
    # connections open as a rank busy elsewhere would: its peers time out rather than lose it.
    try:
        store.set(f"dumped{rank}", "1")
        store.wait([f"dumped{r}" for r in range(WORLD)], WAIT)
    except RuntimeError:
        code = 1
    sys.stdout.flush()
    # Not through the interpreter's exit: gloo's threads may still wait on a timed-out peer.
    os._exit(code)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in CASES:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(CASES)}}} OUT_DIR")
    case, out_dir = sys.argv[1], sys.argv[2]
    for form in ("pickle", "json"):
        os.makedirs(os.path.join(out_dir, form), exist_ok=True)
    rendezvous = os.path.join(out_dir, "rendezvous")
    if os.path.exists(rendezvous):
        os.unlink(rendezvous)
    context = multiprocessing.get_context("fork")
    ranks = [context.Process(target=rank_process, args=(case, r, out_dir, rendezvous))
             for r in range(WORLD)]
    for p in ranks:
        p.start()
    deadline = time.monotonic() + JOB_SECONDS
    for p in ranks:
        p.join(max(0.0, deadline - time.monotonic()))
    failed = False
    for rank, p in enumerate(ranks):
        if p.is_alive():
            print(f"rank {rank} still running after {JOB_SECONDS} s: killed", file=sys.stderr)
            p.kill()
            p.join()
            failed = True
        elif p.exitcode != 0:
            failed = True
    os.unlink(rendezvous) if os.path.exists(rendezvous) else None
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
