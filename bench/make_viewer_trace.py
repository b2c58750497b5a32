#!/usr/bin/env python3
"""Writes a synthetic Chrome Trace Event JSON file for benchmarking ringx-viewer.

The trace looks like a ringx export of a DDP job: one process per rank, named
"rank N (bench)" with pid N + 1, and per rank the lanes "compute" (operator
spans), "comm:world" (allreduces with bytes/seq/group args) and "ddp" (forward,
backward with nested bucket spans, optimizer). Every event is an "X" span, so
the viewer's event count equals --events exactly.

    python3 bench/make_viewer_trace.py --events 1000000 --out /tmp/trace.json

Stdlib only, and streamed: events are formatted into chunks that are written
as they fill, so 10M events (about 1.4 GB; 1M is about 137 MB) take well under
a minute and little memory.
"""

import argparse
import itertools
import random
import sys
import time

LANE_NAMES = ["compute", "comm:world", "ddp"]  # more lanes become "stream N"
OPS = [
    ("aten::linear", 3.1),
    ("aten::layer_norm", 0.6),
    ("aten::gelu", 0.4),
    ("aten::scaled_dot_product_attention", 4.8),
    ("aten::add", 0.2),
    ("aten::dropout", 0.3),
]
BUCKETS = 4
LAYERS = 6
CHUNK_EVENTS = 20000


def us(ns):
    """Nanoseconds as the exporter writes microseconds: up to three decimals."""
    whole, frac = divmod(ns, 1000)
    return f"{whole}.{frac:03d}" if frac else str(whole)


class Writer:
    """Collects formatted events and writes them out in chunks."""

    def __init__(self, out):
        self.out = out
        self.chunk = []
        self.first = True

    def add(self, text):
        self.chunk.append(text)
        if len(self.chunk) >= CHUNK_EVENTS:
            self.flush()

    def add_all(self, events):
        """Writes an iterable of event texts, a chunk at a time."""
        while True:
            chunk = list(itertools.islice(events, CHUNK_EVENTS))
            if not chunk:
                return
            self.chunk.extend(chunk)
            self.flush()

    def flush(self):
        if not self.chunk:
            return
        sep = ",\n"
        self.out.write(("" if self.first else sep) + sep.join(self.chunk))
        self.first = False
        self.chunk = []


def rank_events(rank, ranks, lanes, quota, seed):
    """Yields event texts for one rank until `quota` events are made."""
    rng = random.Random(seed * 7919 + rank)
    pid = rank + 1
    tids = {name: i + 1 for i, name in enumerate(lanes)}
    extra = [name for name in lanes if name not in LANE_NAMES]
    # Operator durations and gaps drawn once and cycled: drawing per event would
    # be most of the script's time.
    jitter = [rng.uniform(0.9, 1.1) for _ in range(4093)]
    gaps = [rng.randint(50, 400) for _ in range(4091)]
    compute = ""
    if "compute" in tids:
        compute = f'{{"ph":"X","pid":{pid},"tid":{tids["compute"]},"ts":'
    ops = [(f',"name":"{name}","cat":"user","args":{{"layer":', int(mean * 1000)) for name, mean in OPS]
    made = 0
    step = 0
    seq = 0
    k = 0
    t = 1000 * rank  # ns; ranks start a little apart, as real ones do
    bucket_bytes = [25 << 20, 25 << 20, 25 << 20, 11 << 20]
    while made < quota:
        step_start = t
        # Forward: operator spans on "compute", one "forward" span on "ddp".
        fwd_start = t
        for layer in range(LAYERS):
            for tail, mean in ops:
                d = int(mean * jitter[k % 4093]) + 500
                if compute and made < quota:
                    yield (f"{compute}{t // 1000}.{t % 1000:03d},\"dur\":{d // 1000}.{d % 1000:03d}"
                           f"{tail}{layer},\"flops\":{d * 1812}}}}}")
                    made += 1
                t += d + gaps[k % 4091]
                k += 1
        if "ddp" in tids and made < quota:
            yield (
                f'{{"ph":"X","pid":{pid},"tid":{tids["ddp"]},"ts":{us(fwd_start)},'
                f'"dur":{us(t - fwd_start)},"name":"forward","cat":"ddp","args":{{"step":{step}}}}}'
            )
            made += 1
        # Backward: buckets become ready one after another, each one's allreduce
        # starts on "comm:world" while the next bucket's gradients are computed.
        bwd_start = t
        comm_free = t
        bucket_spans = []
        for b in range(BUCKETS):
            b_start = t
            t += int(rng.uniform(0.2, 0.35) * 1e6)  # gradient compute for this bucket
            bucket_spans.append((b, b_start, t))
            start = max(t, comm_free) + rng.randint(2000, 9000)
            size = bucket_bytes[b]
            d = int(size / (rng.uniform(80.0, 120.0)))  # ~100 GB/s: bytes / (bytes/ns)
            if "comm:world" in tids and made < quota:
                yield (
                    f'{{"ph":"X","pid":{pid},"tid":{tids["comm:world"]},"ts":{us(start)},'
                    f'"dur":{us(d)},"name":"allreduce","cat":"collective","args":{{'
                    f'"bytes":{size},"seq":{seq},"group":"world","group_rank":{rank},'
                    f'"group_size":{ranks},"op":"allreduce","dtype":"float32"}}}}'
                )
                made += 1
            seq += 1
            comm_free = start + d
        t = max(t, comm_free) + rng.randint(5000, 20000)
        if "ddp" in tids:
            if made < quota:
                yield (
                    f'{{"ph":"X","pid":{pid},"tid":{tids["ddp"]},"ts":{us(bwd_start)},'
                    f'"dur":{us(t - bwd_start)},"name":"backward","cat":"ddp",'
                    f'"args":{{"step":{step}}}}}'
                )
                made += 1
            for b, b_start, b_end in bucket_spans:  # nested inside "backward"
                if made >= quota:
                    break
                yield (
                    f'{{"ph":"X","pid":{pid},"tid":{tids["ddp"]},"ts":{us(b_start)},'
                    f'"dur":{us(b_end - b_start)},"name":"bucket {b}","cat":"ddp",'
                    f'"args":{{"bucket":{b},"params":{12 + 3 * b},"bytes":{bucket_bytes[b]}}}}}'
                )
                made += 1
        # Optimizer.
        opt = int(rng.uniform(0.08, 0.12) * 1e6)
        if "ddp" in tids and made < quota:
            yield (
                f'{{"ph":"X","pid":{pid},"tid":{tids["ddp"]},"ts":{us(t)},"dur":{us(opt)},'
                f'"name":"optimizer","cat":"ddp","args":{{"step":{step}}}}}'
            )
            made += 1
        # Extra lanes (--lanes > 3): a few generic spans each.
        for name in extra:
            for i in range(8):
                if made >= quota:
                    break
                s = step_start + i * (t - step_start) // 8
                yield (
                    f'{{"ph":"X","pid":{pid},"tid":{tids[name]},"ts":{us(s)},'
                    f'"dur":{us((t - step_start) // 10)},"name":"kernel {i}","cat":"user",'
                    f'"args":{{"step":{step}}}}}'
                )
                made += 1
        t += opt + rng.randint(10000, 50000)
        step += 1
        if made == 0:  # no lane produces events: avoid looping forever
            raise SystemExit("no events: give at least one lane")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1000000, help="events in all (default 1M)")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--lanes", type=int, default=3, help="compute, comm:world, ddp, ...")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True, help="the .json file to write")
    args = parser.parse_args()
    if args.events < 0 or args.ranks < 1 or args.lanes < 1:
        parser.error("--events >= 0, --ranks >= 1 and --lanes >= 1")
    lanes = LANE_NAMES[: args.lanes] + [f"stream {i}" for i in range(args.lanes - len(LANE_NAMES))]

    started = time.monotonic()
    with open(args.out, "w", encoding="utf-8", buffering=1 << 20) as out:
        out.write('{"traceEvents":[\n')
        w = Writer(out)
        for rank in range(args.ranks):
            pid = rank + 1
            w.add(
                f'{{"ph":"M","name":"process_name","pid":{pid},"tid":0,'
                f'"args":{{"name":"rank {rank} (bench)","rank":{rank},"host":"bench"}}}}'
            )
            w.add(f'{{"ph":"M","name":"process_sort_index","pid":{pid},"tid":0,'
                  f'"args":{{"sort_index":{rank}}}}}')
            for i, name in enumerate(lanes):
                w.add(f'{{"ph":"M","name":"thread_name","pid":{pid},"tid":{i + 1},'
                      f'"args":{{"name":"{name}"}}}}')
        per_rank, rest = divmod(args.events, args.ranks)
        for rank in range(args.ranks):
            quota = per_rank + (1 if rank < rest else 0)
            w.add_all(rank_events(rank, args.ranks, lanes, quota, args.seed))
        w.flush()
        out.write(
            '\n],\n"displayTimeUnit":"ms",\n"otherData":{"generator":"bench/make_viewer_trace.py",'
            f'"events":{args.events},"ranks":{args.ranks},"lanes":{len(lanes)}}}}}\n'
        )
    elapsed = time.monotonic() - started
    print(f"wrote {args.events} events ({args.ranks} ranks x {len(lanes)} lanes) to {args.out} "
          f"in {elapsed:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
