"""A bounded randomized soak of backend="ringx": thousands of collectives of random kinds,
sizes and dtypes, across overlapping subgroups, with async work in flight, tracing on and a
live client attached; every result is checked against a reference each rank computes
locally, and RSS must stay flat.

    python tests/python/soak.py --world-size 3 --collectives 3000 --seed 1

(`make soak` runs the long form; tests/python/test_soak.py a CI-sized one.)

Why it is built this way:

* One schedule, every rank. All ranks draw the schedule from the same random.Random(seed),
  so they issue the same collectives in the same order; a step on a group a rank is not in
  is skipped by that rank (but drawn all the same, so the sequences never diverge). Issuing
  in one global order is also what makes async work across overlapping groups deadlock-free:
  whatever a rank waits on, every member of its group has issued it or is about to.
* Inputs are a deterministic function of (rank, step), small integers, so every rank can
  compute what every other rank contributed and hence the exact expected result, for every
  dtype: sums of at most a few dozen, products of ones and twos, fit int8, uint8, float16
  and bfloat16 exactly. Results are compared with torch.equal, never with a tolerance.
* Waiting is local. Each rank keeps up to `window` async works in flight and, when it has
  too many, waits on a randomly chosen one (its own random.Random), so the order of waits
  differs from rank to rank while the order of issue does not.
* Tracing is on (files and a live server on every rank), and rank 0 runs a live client on a
  thread: it asks rank 0 for the job's directory, streams every rank's events, and decodes
  the record framing (trace/format/codec.h) to count collective spans per rank. At the end
  every collective each rank ran must have reached the client, none dropped.
* RSS is flat only once ringx's memory has reached the ceiling its design gives it, so
  before the schedule every group is primed (prime(): every shared-memory ring wrapped,
  the scratch buffers, which only grow, at the soak's largest size), and RSS is read after
  a warm-up (the first fifth of the steps), every tenth of the rest and at the end. What
  grows from the warm-up to the end is what a long job would leak. Beside RSS the figures
  split it into heap and shared memory, and give glibc's count of bytes in use, which
  heap fragmentation does not move.

The first wrong result raises SoakMismatch naming the step, kind, group, dtype, size, op and
root, and where the first differing element is.
"""

import argparse
import collections
import ctypes
import functools
import gc
import os
import random
import select
import socket
import sys
import tempfile
import threading
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import run_ranks  # noqa: E402

MiB = 1 << 20

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
          torch.int64, torch.int8, torch.uint8)

# How often each kind is drawn (relative weights).
KINDS = {
    "all_reduce": 5, "broadcast": 2, "all_gather": 1.5, "all_gather_into_tensor": 1.5,
    "reduce_scatter_tensor": 1.5, "reduce_scatter": 0.5, "reduce": 1.5, "gather": 1,
    "scatter": 1, "all_to_all_single": 1.5, "barrier": 0.5, "send_recv": 2,
}
FLOAT_OPS = ("SUM", "MAX", "MIN", "PRODUCT", "AVG", "PREMUL_SUM")
INT_OPS = ("SUM", "MAX", "MIN", "PRODUCT", "BAND", "BOR", "BXOR")
PREMUL_FACTOR = 2.0  # a power of two: the pre-multiplied sum stays exact


class SoakMismatch(AssertionError):
    """A collective's result differs from the locally computed reference."""


# ---- the schedule (identical on every rank) ---------------------------------------------

def group_layouts(world):
    """The member lists of the subgroups, overlapping on purpose: every pair (or, past four
    ranks, neighbours and the two ends), a second group of everyone, and for four or more
    ranks two overlapping triples-or-more and the even ranks."""
    if world <= 4:
        pairs = [[i, j] for i in range(world) for j in range(i + 1, world)]
    else:
        pairs = [[i, i + 1] for i in range(world - 1)] + [[0, world - 1]]
    layouts = pairs + ([list(range(world))] if world >= 3 else [])
    if world >= 4:
        layouts += [list(range(world - 1)), list(range(1, world)), list(range(0, world, 2))]
    unique = []
    for members in layouts:
        if members not in unique:
            unique.append(members)
    return unique


def pick_size(rng, max_elements):
    """Mostly small, some medium, a few large; 0 and 1 included on purpose."""
    r = rng.random()
    if r < 0.08:
        n = rng.choice((0, 1))
    elif r < 0.60:
        n = rng.randint(2, 64)
    elif r < 0.88:
        n = rng.randint(65, 4096)
    elif r < 0.97:
        n = rng.randint(4097, 65536)
    else:
        n = rng.randint(65537, max(65537, max_elements))
    return min(n, max_elements)


Step = collections.namedtuple(
    "Step", "index kind group members dtype n op root peer splits async_op")


def draw_step(rng, index, groups, max_elements, kinds=KINDS):
    """One step of the schedule. Every rank draws every step, whether or not it is in the
    step's group, so that the sequence is a function of the seed alone."""
    name, members = rng.choice(groups)
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    dtype = rng.choice(DTYPES)
    n = pick_size(rng, max_elements)
    ops = FLOAT_OPS if dtype.is_floating_point else INT_OPS
    op = rng.choice(ops)
    root = rng.choice(members)
    peer = rng.choice([m for m in members if m != root])
    async_op = rng.random() < 0.6
    splits = None
    if kind == "all_to_all_single":
        g = len(members)
        if rng.random() < 0.5:  # uneven: a random matrix of chunk sizes, sender x receiver
            cap = max(1, n // g)
            splits = [[rng.randint(0, cap) for _ in range(g)] for _ in range(g)]
        # else even: n elements per peer (splits None)
    return Step(index, kind, name, members, dtype, n, op, root, peer, splits, async_op)


# ---- inputs and references ---------------------------------------------------------------

def moved_values(rank, step, n, dtype, salt=0):
    """What a rank contributes to a collective that only moves data: 0..96, distinct per
    rank, step and salt, exact in every dtype."""
    v = (torch.arange(n, dtype=torch.int64) * 7 + rank * 31 + step * 13 + salt * 17) % 97
    return v.to(dtype)


def reduced_values(rank, step, n, dtype, op):
    """What a rank contributes to a reduction: small enough that the reduction over a
    group is exact in the dtype (sums within +-4 per rank, products of 1s and 2s, and -1s
    for signed types), so the reference can be computed in the dtype itself."""
    i = torch.arange(n, dtype=torch.int64)
    signed = dtype != torch.uint8
    if op == "PRODUCT":
        table = torch.tensor([1, 2, -1, 1] if signed else [1, 2, 1, 1], dtype=torch.int64)
        v = table[(i + rank + step) % 4]
    elif op in ("MIN", "MAX", "BAND", "BOR", "BXOR"):
        v = (i * 7 + rank * 31 + step * 13) % 97 - (48 if signed else 0)
    else:  # SUM, AVG, PREMUL_SUM
        v = (i * 7 + rank * 3 + step) % 8 - (4 if signed else 0)
    return v.to(dtype)


def reduce_reference(inputs, op, group_size):
    """The expected reduction (harness.reduce_reference) with the soak's PREMUL_SUM factor."""
    return harness.reduce_reference(inputs, op, group_size, PREMUL_FACTOR)


def torch_op(op):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(PREMUL_FACTOR)
    return getattr(dist.ReduceOp, op)


# What a collective must leave as it found it: its inputs (torch's contract; a backend that
# used them as scratch would corrupt the caller's data).
UNTOUCHED = "input, which must be left as it was"


def garbage(n, dtype):
    """An output buffer full of a value no correct result has in that position (mostly)."""
    return torch.full((n,), 123, dtype=torch.int64).to(dtype)


def check(step, rank, what, got, expected):
    if got.dtype == expected.dtype and got.shape == expected.shape and torch.equal(got, expected):
        return
    detail = f"got dtype {got.dtype} shape {tuple(got.shape)}"
    if got.shape == expected.shape:
        differs = (got.to(torch.float64) != expected.to(torch.float64)).nonzero()
        if len(differs):
            k = int(differs[0][0]) if differs.dim() > 1 else int(differs[0])
            flat_got, flat_exp = got.reshape(-1), expected.reshape(-1)
            detail = (f"{len(differs)} of {got.numel()} elements differ; first at [{k}]: "
                      f"got {flat_got[k].item()} expected {flat_exp[k].item()}")
    raise SoakMismatch(
        f"step {step.index}: {step.kind} on group {step.group} {step.members} "
        f"dtype {str(step.dtype).replace('torch.', '')} n={step.n} op={step.op} "
        f"root={step.root} peer={step.peer} async={step.async_op} splits={step.splits}: "
        f"rank {rank}, {what}: {detail}")


# ---- issuing one step ---------------------------------------------------------------------

def issue(step, rank, group):
    """Issues `step` on this rank. Returns (work or None when it already ran, checks, payload
    bytes), checks being the (what, tensor, expected) to compare once it is done; or None
    for a member of the group that takes no part (the others of a send/recv pair)."""
    k, n, dtype, members, s, op = step.kind, step.n, step.dtype, step.members, step.index, step.op
    g = len(members)
    me = members.index(rank)
    a = step.async_op
    mine = moved_values(rank, s, n, dtype)  # what this rank sends in a data-moving step
    checks = []

    def everyones_inputs(count):
        return [reduced_values(m, s, count, dtype, op) for m in members]

    if k == "all_reduce":
        t = reduced_values(rank, s, n, dtype, op)
        work = dist.all_reduce(t, op=torch_op(op), group=group, async_op=a)
        checks.append(("tensor", t, reduce_reference(everyones_inputs(n), op, g)))
        nbytes = t.nbytes

    elif k == "broadcast":
        t = mine.clone() if rank == step.root else garbage(n, dtype)
        work = dist.broadcast(t, src=step.root, group=group, async_op=a)
        checks.append(("tensor", t, moved_values(step.root, s, n, dtype)))
        nbytes = t.nbytes

    elif k == "all_gather":
        out = [garbage(n, dtype) for _ in members]
        inp = mine.clone()
        work = dist.all_gather(out, inp, group=group, async_op=a)
        checks += [(f"output[{i}] (from rank {m})", out[i], moved_values(m, s, n, dtype))
                   for i, m in enumerate(members)]
        checks.append((UNTOUCHED, inp, mine))
        nbytes = n * g * dtype.itemsize

    elif k == "all_gather_into_tensor":
        out = garbage(n * g, dtype)
        inp = mine.clone()
        work = dist.all_gather_into_tensor(out, inp, group=group, async_op=a)
        expected = torch.cat([moved_values(m, s, n, dtype) for m in members])
        checks += [("output", out, expected), (UNTOUCHED, inp, mine)]
        nbytes = out.nbytes

    elif k in ("reduce_scatter_tensor", "reduce_scatter"):
        inp = reduced_values(rank, s, n * g, dtype, op)
        out = garbage(n, dtype)
        if k == "reduce_scatter_tensor":
            work = dist.reduce_scatter_tensor(out, inp, op=torch_op(op), group=group, async_op=a)
        else:
            chunks = list(inp.split(n)) if n else [inp.new_empty(0) for _ in members]
            work = dist.reduce_scatter(out, chunks, op=torch_op(op), group=group, async_op=a)
        shares = [t[me * n:(me + 1) * n] for t in everyones_inputs(n * g)]
        checks += [("output", out, reduce_reference(shares, op, g)),
                   (UNTOUCHED, inp, reduced_values(rank, s, n * g, dtype, op))]
        nbytes = inp.nbytes

    elif k == "reduce":
        t = reduced_values(rank, s, n, dtype, op)
        work = dist.reduce(t, dst=step.root, op=torch_op(op), group=group, async_op=a)
        if rank == step.root:  # torch leaves the other ranks' tensors unspecified
            checks.append(("tensor at root", t, reduce_reference(everyones_inputs(n), op, g)))
        nbytes = t.nbytes

    elif k == "gather":
        out = [garbage(n, dtype) for _ in members] if rank == step.root else None
        inp = mine.clone()
        work = dist.gather(inp, gather_list=out, dst=step.root, group=group, async_op=a)
        checks += [(f"gather_list[{i}] (from rank {m})", out[i], moved_values(m, s, n, dtype))
                   for i, m in enumerate(members) if out is not None]
        checks.append((UNTOUCHED, inp, mine))
        nbytes = n * dtype.itemsize * (g if out is not None else 1)

    elif k == "scatter":
        share = [moved_values(step.root, s, n, dtype, salt=i + 1) for i in range(g)]
        chunks = [t.clone() for t in share] if rank == step.root else None
        out = garbage(n, dtype)
        work = dist.scatter(out, scatter_list=chunks, src=step.root, group=group, async_op=a)
        checks.append(("output", out, share[me]))
        checks += [(f"scatter_list[{i}], an {UNTOUCHED}", chunks[i], share[i])
                   for i in range(g) if chunks is not None]
        nbytes = out.nbytes

    elif k == "all_to_all_single":
        sizes = step.splits or [[n] * g for _ in range(g)]  # sizes[sender][receiver]
        sent = torch.cat([moved_values(rank, s, sizes[me][j], dtype, salt=j + 1)
                          for j in range(g)])
        inp = sent.clone()
        out = garbage(sum(sizes[i][me] for i in range(g)), dtype)
        work = dist.all_to_all_single(
            out, inp, group=group, async_op=a,
            output_split_sizes=[sizes[i][me] for i in range(g)] if step.splits else None,
            input_split_sizes=sizes[me] if step.splits else None)
        expected = torch.cat([moved_values(m, s, sizes[i][me], dtype, salt=me + 1)
                              for i, m in enumerate(members)])
        checks += [("output", out, expected), (UNTOUCHED, inp, sent)]
        nbytes = inp.nbytes + out.nbytes

    elif k == "barrier":
        work = dist.barrier(group=group, async_op=a)
        nbytes = 0

    elif k == "send_recv":
        src, dst, tag = step.root, step.peer, s % 1000
        if rank == src:
            t = mine.clone()
            work = (dist.isend if a else dist.send)(t, dst=dst, group=group, tag=tag)
            checks.append((f"sent tensor, an {UNTOUCHED}", t, mine))
        elif rank == dst:
            t = garbage(n, dtype)
            work = (dist.irecv if a else dist.recv)(t, src=src, group=group, tag=tag)
            checks.append(("received tensor", t, moved_values(src, s, n, dtype)))
        else:
            return None
        nbytes = t.nbytes

    else:
        raise ValueError(f"unknown kind {k}")
    return (work if a else None), checks, nbytes


def verify_all(step, rank, checks):
    for what, got, expected in checks:
        check(step, rank, what, got, expected)


def traced_span_count(step, rank):
    """How many collective spans this step adds to the rank's trace: one for every
    collective it takes part in; point-to-point messages are not collectives."""
    return 0 if step.kind == "send_recv" else 1


def expected_spans(config, world):
    """The collective spans each rank's trace gets from the whole schedule."""
    schedule = random.Random(config["seed"])
    choices = [("world", list(range(world)))] + [("", m) for m in group_layouts(world)]
    counts = [0] * world
    for index in range(config["collectives"]):
        step = draw_step(schedule, index, choices, config["max_elements"], config["kinds"])
        for rank in step.members:
            counts[rank] += traced_span_count(step, rank)
    return counts


# ---- the live client -----------------------------------------------------------------------

LIVE_MAGIC = b"RINGXT\n\x1a"
RECORD_HEADER, RECORD_STRING, RECORD_EVENT, RECORD_DROPPED = 1, 2, 3, 5
CATEGORY_COLLECTIVE = 1
SPAN = 1


def _varint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _signed(buf, pos):
    v, pos = _varint(buf, pos)
    return (v >> 1) ^ -(v & 1), pos


class StreamCounter:
    """Decodes one rank's live stream far enough to count: the record framing (u32 length,
    type byte), the header's rank, the string table, and each event's kind, category and
    name; Dropped records' counts."""

    def __init__(self, address):
        self.address = address
        self.buffer = bytearray()
        self.saw_magic = False
        self.bytes = 0
        self.records = 0
        self.events = 0
        self.rank = None
        self.strings = {0: ""}
        self.collectives = collections.Counter()  # span name -> count
        self.dropped = 0

    def feed(self, data):
        self.bytes += len(data)
        self.buffer += data
        pos = 0
        if not self.saw_magic:
            if len(self.buffer) < len(LIVE_MAGIC):
                return
            if bytes(self.buffer[:len(LIVE_MAGIC)]) != LIVE_MAGIC:
                raise AssertionError(f"live stream from {self.address} does not start with "
                                     f"the trace magic: {bytes(self.buffer[:16])!r}")
            self.saw_magic, pos = True, len(LIVE_MAGIC)
        buf = self.buffer
        while len(buf) - pos >= 4:
            length = int.from_bytes(buf[pos:pos + 4], "little")
            if len(buf) - pos - 4 < length:
                break
            self._record(buf[pos + 4], bytes(buf[pos + 5:pos + 4 + length]))
            pos += 4 + length
        del self.buffer[:pos]

    def _record(self, kind, payload):
        self.records += 1
        if kind == RECORD_HEADER:
            _, p = _varint(payload, 0)
            self.rank, _ = _signed(payload, p)
        elif kind == RECORD_STRING:
            sid, p = _varint(payload, 0)
            size, p = _varint(payload, p)
            self.strings[sid] = payload[p:p + size].decode("utf-8", "replace")
        elif kind == RECORD_EVENT:
            self.events += 1
            event_kind, category = payload[0], payload[1]
            if category == CATEGORY_COLLECTIVE and event_kind == SPAN:
                _, p = _signed(payload, 2)  # rank
                _, p = _varint(payload, p)  # track
                name, p = _varint(payload, p)
                self.collectives[self.strings.get(name, f"#{name}")] += 1
        elif kind == RECORD_DROPPED:
            _, p = _signed(payload, 0)
            count, _ = _varint(payload, p)
            self.dropped += count


def _live_request(address, what, timeout=10.0):
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    sock.sendall(f"RINGX-LIVE 1 - {what}\n".encode())
    line = b""
    while not line.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        line += chunk
    return sock, line.decode().strip()


class LiveClient(threading.Thread):
    """Attaches to a running job as a viewer does: DIRECTORY from rank 0's live server, then
    one STREAM per rank, read until stop()."""

    def __init__(self, address, world):
        super().__init__(daemon=True, name="soak-live-client")
        self.address, self.world = address, world
        self.streams = []
        self.error = None
        self.ready = threading.Event()
        self._halt = threading.Event()
        self._lock = threading.Lock()  # the counters, between this thread and the rank's

    def directory(self):
        deadline = time.monotonic() + 30
        while True:
            sock, status = _live_request(self.address, "DIRECTORY")
            with sock:
                if status.startswith("OK "):
                    count = int(status.split()[1])
                    data = b""
                    while data.count(b"\n") < count:
                        chunk = sock.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    entries = [line.split() for line in data.decode().splitlines()[:count]]
                    return {int(r): f"{h}:{p}" for r, h, p in entries}
            if time.monotonic() > deadline:
                raise AssertionError(f"live server {self.address}: no directory: {status}")
            time.sleep(0.1)  # "ERR directory not ready": the ranks are still publishing

    def run(self):
        socks = {}
        try:
            directory = self.directory()
            if sorted(directory) != list(range(self.world)):
                raise AssertionError(f"live directory lists ranks {sorted(directory)}, "
                                     f"not the {self.world} of the job")
            for rank, address in sorted(directory.items()):
                sock, status = _live_request(address, "STREAM")
                if status != "OK":
                    raise AssertionError(f"live STREAM from rank {rank} at {address}: {status}")
                sock.setblocking(False)
                counter = StreamCounter(address)
                self.streams.append(counter)
                socks[sock] = counter
            self.ready.set()
            while socks and not self._halt.is_set():
                readable, _, _ = select.select(list(socks), [], [], 0.1)
                for sock in readable:
                    data = sock.recv(1 << 20)
                    if not data:  # the server closed
                        sock.close()
                        del socks[sock]
                    else:
                        with self._lock:
                            socks[sock].feed(data)
        except BaseException as e:  # reported by figures(), never lost
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.ready.set()
            for sock in socks:
                sock.close()

    def stop(self):
        self._halt.set()
        self.join(timeout=10)

    def collectives_of(self, rank):
        """Collective spans received from `rank`, and events it reported dropped."""
        with self._lock:
            return sum(sum(c.collectives.values()) + c.dropped
                       for c in self.streams if c.rank == rank)

    def figures(self):
        """What was received (call after stop())."""
        return {
            "error": self.error,
            "bytes": sum(c.bytes for c in self.streams),
            "events": sum(c.events for c in self.streams),
            "dropped": sum(c.dropped for c in self.streams),
            "per_rank": {c.rank: {"bytes": c.bytes, "events": c.events, "dropped": c.dropped,
                                  "collectives": dict(c.collectives)} for c in self.streams},
        }


# ---- one rank -----------------------------------------------------------------------------

def shm_ring_bytes():
    """Bytes of one direction of a shared-memory pair's ring at most (docs/usage.md,
    "Environment": RINGX_SHM_BYTES; 1 MiB rather than 4 where the host has fewer cores than
    ranks, which priming with the larger size covers too)."""
    return int(os.environ.get("RINGX_SHM_BYTES") or 4 * MiB)


def prime(group, members, rank, max_elements):
    """Brings this rank's memory on `group` to the ceiling ringx's design gives it, so that
    what RSS does afterwards is growth, not first touches:

    * the shared-memory rings: their pages become resident as the ring's cursors first go
      round (6 pairs of 2 x 4 MiB on a rank of the 3-rank soak), which small messages take
      thousands of steps to do. One all_to_all_single of a ring and a bit per peer wraps
      every direction of every pair of the group.
    * the group's Workspace (algorithms/workspace.h), which only grows: the largest
      reduction of the soak, in float64, through the ring reduce-scatter (its scratch is
      the whole input) and the chain reduce (both its slots).
    * the process group's own scratch tensors (ProcessGroupRingx::scratch_), which also
      only grow: gather and scatter flatten the root's list into one, so each member, as
      root, gathers the largest tensor of the soak once.
    """
    g = len(members)
    chunk = shm_ring_bytes() + 64 * 1024
    out = torch.empty(chunk * g, dtype=torch.uint8)
    dist.all_to_all_single(out, torch.zeros(chunk * g, dtype=torch.uint8), group=group)
    biggest = torch.zeros(max_elements * g, dtype=torch.float64)
    dist.reduce_scatter_tensor(torch.empty(max_elements, dtype=torch.float64), biggest,
                               group=group)
    dist.all_reduce(biggest, group=group)
    dist.reduce(biggest, dst=members[0], group=group)
    one = torch.zeros(max_elements, dtype=torch.float64)
    for root in members:
        gathered = [torch.empty_like(one) for _ in members] if rank == root else None
        dist.gather(one, gathered, dst=root, group=group)


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def rss_parts():
    """This process's memory: {"rss", "RssAnon", "RssFile", "RssShmem"} from
    /proc/self/status, and "in_use", the bytes malloc has handed out and not had back
    (glibc's mallinfo2; None elsewhere).

    RSS is read after handing glibc's free heap memory back to the kernel: the allocator
    otherwise keeps tens of MiB of freed tensors resident, and how much depends on the last
    few sizes drawn, not on what is still allocated. RssShmem is the shared-memory rings
    (flat once prime() has run); RssAnon the heap, which also holds what fragmentation
    strands; in_use is what a leak would grow."""
    parts = {"in_use": None}
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim(0)
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
        parts["in_use"] = info.uordblks + info.hblkhd
    except (OSError, AttributeError):  # not glibc, or older than 2.33
        pass
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Rss"):
                key, value = line.split(":")
                parts[key] = int(value.split()[0]) * 1024
    parts["rss"] = parts.get("RssAnon", 0) + parts.get("RssFile", 0) + parts.get("RssShmem", 0)
    return parts


def soak_rank(config, rank, world):
    """Runs the whole schedule on this rank; returns its figures (plain Python values)."""
    import warnings

    import ringx.trace

    # torch 2.13 calls all_gather_into_tensor and reduce_scatter_tensor deprecated; the soak
    # uses them on purpose (what most code still calls), once per step: keep the log readable.
    warnings.filterwarnings("ignore", message=".*is deprecated. Please use",
                            category=FutureWarning)

    # Every rank creates every group, in the same order (new_group is collective on the
    # default group even for non-members).
    groups = [("world", list(range(world)), None)]
    for i, members in enumerate(group_layouts(world)):
        groups.append((f"g{i}:" + "".join(map(str, members)), members, dist.new_group(members)))
    by_name = {name: pg for name, _, pg in groups}
    choices = [(name, members) for name, members, _ in groups]
    for _, members, pg in groups:
        if rank in members:
            prime(pg, members, rank, config["max_elements"])

    # Tracing starts on groups that already exist, as when a user turns it on mid-job.
    if config["trace"]:
        ringx.trace.start(dir=config["trace_dir"], listen="127.0.0.1:0")
    live = None
    if rank == 0 and config["trace"]:
        live = LiveClient(ringx.trace.live_address(), world)
        live.start()
        live.ready.wait(30)

    schedule = random.Random(config["seed"])             # the same on every rank
    local = random.Random(config["seed"] * 7919 + rank)  # this rank's order of waits
    pending = []  # (work, verify) in flight
    kinds = collections.Counter()
    figures = {"rank": rank, "collectives": 0, "async": 0, "bytes": 0, "max_in_flight": 0}
    warmup = max(1, config["collectives"] // 5)
    sample_every = max(1, (config["collectives"] - warmup) // 10)
    memory = []  # rss_parts() at the end of warm-up, every tenth of the rest, and the end

    def wait_one(index):
        work, verify = pending.pop(index)
        work.wait()
        verify()

    def drain():
        while pending:
            wait_one(local.randrange(len(pending)))

    began = time.monotonic()
    for index in range(config["collectives"]):
        if index >= warmup and (index - warmup) % sample_every == 0:
            if index == warmup:
                drain()  # the baseline holds no tensor in flight; later samples may
            gc.collect()
            memory.append(rss_parts())
        step = draw_step(schedule, index, choices, config["max_elements"], config["kinds"])
        if rank not in step.members:
            continue
        issued = issue(step, rank, by_name[step.group])
        if issued is None:
            continue  # a member of the group outside this send/recv pair
        work, checks, nbytes = issued
        verify = functools.partial(verify_all, step, rank, checks)
        kinds[step.kind] += 1
        figures["collectives"] += 1
        figures["bytes"] += nbytes
        if work is None:
            verify()
            continue
        figures["async"] += 1
        pending.append((work, verify))
        figures["max_in_flight"] = max(figures["max_in_flight"], len(pending))
        while len(pending) > local.randint(1, config["window"]):
            wait_one(local.randrange(len(pending)))
    drain()
    elapsed = time.monotonic() - began
    gc.collect()
    memory.append(rss_parts())

    # Every collective each rank ran must reach the live client. Rank 0 knows how many
    # each rank ran: the schedule is the seed's. (Counting them with a collective would
    # add spans of its own.)
    if config["trace"]:
        ringx.trace.flush()
    if live is not None:
        expected = expected_spans(config, world)
        deadline = time.monotonic() + 30
        while (time.monotonic() < deadline and live.error is None
               and any(live.collectives_of(r) < expected[r] for r in range(world))):
            time.sleep(0.05)
        live.stop()
        figures["live"] = live.figures()
        figures["live"]["expected_collectives"] = expected
        figures["live"]["received_collectives"] = [live.collectives_of(r) for r in range(world)]
    dist.barrier()
    if config["trace"]:
        ringx.trace.stop()

    first, last = memory[0], memory[-1]
    figures.update(
        kinds=dict(kinds), elapsed_s=elapsed,
        rss_start=first["rss"], rss_end=last["rss"],
        anon_start=first["RssAnon"], anon_end=last["RssAnon"],
        shmem_start=first["RssShmem"], shmem_end=last["RssShmem"],
        in_use_start=first["in_use"], in_use_end=last["in_use"],
        rss_trend_mib=[round(m["rss"] / MiB, 1) for m in memory])
    return figures


# ---- the whole job -------------------------------------------------------------------------

def run_soak(world_size=3, collectives=3000, seed=1, max_elements=200_000, window=4,
             timeout=None, trace_dir=None, trace=True, kinds=None, env=None):
    """Runs the soak on `world_size` ranks; returns each rank's figures. Raises SoakMismatch
    (the first wrong result, as the rank that saw it reported it) or RankFailed. `env` is
    run_ranks's: variables for every rank (a dict) or for each (a function of the rank)."""
    from harness import RankFailed

    with tempfile.TemporaryDirectory(prefix="ringx-soak-") as tmp:
        config = {"seed": seed, "collectives": collectives, "max_elements": max_elements,
                  "window": window, "trace": trace,
                  "kinds": {k: KINDS[k] for k in kinds} if kinds else KINDS,
                  "trace_dir": trace_dir or os.path.join(tmp, "trace")}
        timeout = timeout or 120 + collectives // 20
        # A collective that takes a minute has hung (the largest take milliseconds).
        results = run_ranks(functools.partial(soak_rank, config), world_size, timeout=timeout,
                            group_timeout_s=60, env=env, allow_errors=True)
    failed = [(r, value) for r, value in enumerate(results)
              if isinstance(value, tuple) and value[0] != "ok"]
    if failed:
        # A wrong result on one rank leaves the others waiting until their collectives time
        # out: report the mismatch, not its echoes.
        failed.sort(key=lambda f: 0 if "SoakMismatch" in str(f[1][1]) else 1)
        rank, (status, text) = failed[0]
        others = ", ".join(f"rank {r}: {s}" for r, (s, _) in failed[1:])
        message = (f"soak world {world_size} seed {seed} ({collectives} steps): rank {rank} "
                   f"{status}: {text}" + (f"\n(also failed: {others})" if others else ""))
        if "SoakMismatch" in str(text):
            raise SoakMismatch(message)
        raise RankFailed(message)
    return [value[1] if isinstance(value, tuple) else value for value in results]


def summary(figures):
    """The figures as one table, then the live client's line and the kinds run."""
    lines = [f"{'rank':>4} {'collectives':>11} {'async':>6} {'MiB moved':>9} {'elapsed s':>9} "
             f"{'coll/s':>6} {'RSS warm MiB':>12} {'RSS end MiB':>11} {'growth':>7} "
             f"{'heap':>6} {'shm':>5} {'malloc in use':>13}"]
    for f in figures:
        in_use = ("n/a" if f["in_use_start"] is None
                  else f"{(f['in_use_end'] - f['in_use_start']) / MiB:+.1f}")
        lines.append(
            f"{f['rank']:>4} {f['collectives']:>11} {f['async']:>6} {f['bytes'] / MiB:>9.1f} "
            f"{f['elapsed_s']:>9.1f} {f['collectives'] / max(f['elapsed_s'], 1e-9):>6.0f} "
            f"{f['rss_start'] / MiB:>12.1f} {f['rss_end'] / MiB:>11.1f} "
            f"{(f['rss_end'] - f['rss_start']) / MiB:>+7.1f} "
            f"{(f['anon_end'] - f['anon_start']) / MiB:>+6.1f} "
            f"{(f['shmem_end'] - f['shmem_start']) / MiB:>+5.1f} {in_use:>13}")
    live = figures[0].get("live")
    if live:
        lines.append(f"live client on rank 0: {live['bytes'] / MiB:.2f} MiB, {live['events']} "
                     f"events; collective spans per rank {live['received_collectives']} of "
                     f"{live['expected_collectives']} run, {live['dropped']} dropped"
                     + (f"; error: {live['error']}" if live["error"] else ""))
    kinds = collections.Counter()
    for f in figures:
        kinds.update(f["kinds"])
    lines.append("by kind, all ranks: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    trend = " ".join(map(str, figures[0]["rss_trend_mib"]))
    lines.append(f"RSS MiB from warm-up to end, rank 0: {trend}")
    return "\n".join(lines)


def check_figures(figures, rss_bound_mib):
    """What passing means beyond every result matching (which the ranks check as they go):
    RSS flat after warm-up, and every collective of every rank seen by the live client.
    Returns the problems, [] when there are none."""
    problems = []
    for f in figures:
        growth = f["rss_end"] - f["rss_start"]
        if growth > rss_bound_mib * MiB:
            problems.append(
                f"rank {f['rank']}: RSS grew {growth / MiB:.1f} MiB after warm-up "
                f"({f['rss_start'] / MiB:.1f} -> {f['rss_end'] / MiB:.1f} MiB; heap "
                f"{(f['anon_end'] - f['anon_start']) / MiB:+.1f}, shared memory "
                f"{(f['shmem_end'] - f['shmem_start']) / MiB:+.1f}), bound {rss_bound_mib} MiB")
    live = figures[0].get("live")
    if live is None:
        problems.append("rank 0 ran no live client")
    else:
        if live["error"]:
            problems.append(f"live client: {live['error']}")
        if not live["events"] or not live["bytes"]:
            problems.append("live client received no events")
        if live["dropped"]:
            problems.append(f"live server dropped {live['dropped']} events for the client")
        if live["received_collectives"] != live["expected_collectives"]:
            problems.append(f"live client received {live['received_collectives']} collective "
                            f"spans per rank, the ranks ran {live['expected_collectives']}")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="A bounded randomized soak of backend='ringx' (see the module's docs).")
    parser.add_argument("--world-size", type=int, default=3)
    parser.add_argument("--collectives", type=int, default=3000,
                        help="steps of the schedule; each rank runs those of its groups")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-elements", type=int, default=200_000,
                        help="largest tensor of a step, in elements")
    parser.add_argument("--window", type=int, default=4, help="most async works in flight")
    parser.add_argument("--kinds", help="comma-separated subset of: " + ", ".join(KINDS)
                        + " (to narrow down a failure)")
    parser.add_argument("--rss-bound-mib", type=float, default=32,
                        help="most RSS may grow from the end of warm-up to the end")
    parser.add_argument("--trace-dir", help="keep the trace here (default: a temporary one)")
    parser.add_argument("--no-trace", action="store_true",
                        help="no tracing and no live client (to tell a problem in tracing from "
                             "one elsewhere); the live checks are skipped")
    args = parser.parse_args(argv)
    if args.world_size < 2:
        parser.error("--world-size must be at least 2 (sends and subgroups need a peer)")
    kinds = args.kinds.split(",") if args.kinds else None
    unknown = set(kinds or ()) - set(KINDS)
    if unknown:
        parser.error(f"unknown kinds {sorted(unknown)}; choose from {', '.join(KINDS)}")
    began = time.monotonic()
    figures = run_soak(args.world_size, args.collectives, args.seed, args.max_elements,
                       args.window, trace_dir=args.trace_dir, trace=not args.no_trace,
                       kinds=kinds)
    print(f"soak: world {args.world_size}, {args.collectives} steps, seed {args.seed}: every "
          f"result matched its reference ({time.monotonic() - began:.1f} s in all)")
    print(summary(figures))
    problems = check_figures(figures, args.rss_bound_mib)
    if args.no_trace:
        problems = [p for p in problems if "live" not in p]
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
