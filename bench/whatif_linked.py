"""What-if checked where its answers matter: DDP jobs across hosts joined by links of a set speed
(network namespaces, tc-shaped: tests/python/netns_hosts.py), one rank a host, where a bucket
plan moves the step by more than the machine's noise. Each change is predicted from the base
run's ringx trace (`ringx-trace whatif`), then run for real, alternating rounds.

    .venv/bin/python bench/whatif_linked.py [--hosts 2] [--rate-mbit 1000] [--rounds 3]
                                            [--cpus-per-host 0.4] [--batch 128]
                                            [--engines torch-ddp,ddp,fsdp,fsdp2]
                                            [--link-factors 0.25,0.5,2] [--host-counts 3,4]
                                            [--quick]

First the link: iperf3 between the first two hosts, beside the TCP payload share of the rate.
The model (4 x Linear(1024), batch 128, one compute thread a rank) has 16 MB of gradients: at
1 Gbit/s a rank's ring allreduce of them takes about as long as its backward, so how many
buckets overlap backward decides the step. The base plan is bucket_cap_mb=4 (a bucket a layer);
the changes are bucket caps (one bucket, two); the DDP engines' base also at other rates (the
link rows), and every engine's base on 3 and 4 hosts (the host rows: predicted with
--world-size from a 2-host run of their own). In the host rows each host has a CPU of its own,
--cpus-per-host of a core (a CFS quota, netns_hosts.Hosts' `cpus`), the same on 2, 3 and 4
hosts, as separate machines: without it 4 hosts' ranks shared this machine's 2 cores, computed
slower than 2 hosts' did, and the what-if, which gives each new host cores of its own, missed
by 10-20%. The other rows keep the machine's cores (2 ranks, 2 cores): 0.4 of a core cannot
drive 2 Gbit/s of TCP beside its compute. Where no cgroup can give a host its share, the host
rows share the machine (a line says so). Printed: per engine the predicted and measured steps
(medians of the rounds), the error, the measured rounds' spread.

--quick (make test runs it through tests/python/test_bench.py): 2 hosts, one round, one change
per engine (QUICK): the rate, and whether each prediction moves the way its run does.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
sys.path.insert(0, HERE)
import docs_table  # noqa: E402  (bench/ is not a package)

WIDTH, LAYERS, BATCH = 1024, 4, 128
# Each host's CPU: 4 hosts of 0.4 of a core take 1.6 of this machine's 2, leaving the rest to
# the links' kernel work and the bench.
CPUS_PER_HOST = 0.4
BASE_CAP = 4
CAPS = [100, 8]
ENGINES = {"torch-ddp": "torch DDP", "ddp": "ringx.ddp", "fsdp": "ringx.fsdp", "fsdp2": "FSDP2"}
# The FSDP engines run bench/whatif.py's first FSDP model and its configurations (its runs and
# analysis, on these hosts).
FSDP_SHAPE = "8 blocks of d=256"
# --quick's one change per engine, each a move several times the rounds' spread at 1 Gbit/s: the
# DDP engines' one bucket (torch DDP) and the link at half the rate (ringx.ddp, whose buckets
# barely move its step here), ringx.fsdp's and FSDP2's configurations by their labels.
QUICK = {"torch-ddp": "bucket_cap_mb=100", "ddp": "link 500 Mbit/s",
         "fsdp": "sharding_strategy=SHARD_GRAD_OP", "fsdp2": "reshard_after_forward=False"}
QUICK_CAPS, QUICK_LINK_FACTORS = [100], [0.5]


def run_dir(root, engine, cap, r):
    return os.path.join(root, engine, f"cap{cap:g}", f"round{r}")


def rank_main(argv):
    """One rank (in its host): every engine's configurations, each traced into its run_dir."""
    parser = argparse.ArgumentParser()
    for flag in ("--rank", "--world", "--rounds", "--steps", "--batch"):
        parser.add_argument(flag, type=int, required=True)
    parser.add_argument("--init", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--engines", required=True)
    parser.add_argument("--caps", required=True)
    parser.add_argument("--fsdp-changes", default="",
                        help="the FSDP configurations run, by label, ';' between (default: all)")
    args = parser.parse_args(argv)
    import datetime

    import torch
    import torch.distributed as dist
    from torch import nn

    import ringx
    from ringx.ddp import DistributedDataParallel as RingxDDP

    torch.set_num_threads(1)
    dist.init_process_group("ringx", init_method=args.init, rank=args.rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=120))
    generator = torch.Generator().manual_seed(args.rank)
    x = torch.randn(args.batch, WIDTH, generator=generator)
    y = torch.randn(args.batch, WIDTH, generator=generator)
    caps = [BASE_CAP] + [float(c) for c in args.caps.split(",") if c]

    def run(engine, cap, where):
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])
        ddp = (nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap)
               if engine == "torch-ddp" else RingxDDP(model, bucket_cap_mb=cap))
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
        dist.barrier()
        if where:
            ringx.trace.start(dir=where)
        for _ in range(args.steps):
            opt.zero_grad()
            nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
        if where:
            ringx.trace.stop()

    import whatif as one_host  # bench/whatif.py

    for engine in args.engines.split(","):
        if engine in ("fsdp", "fsdp2"):
            one_host.fsdp_runs(args.root, args.rounds, args.steps, generator, engine, FSDP_SHAPE,
                               fsdp_labels(args.fsdp_changes))
            continue
        run(engine, BASE_CAP, None)  # warms the allocator and the ring, not analysed
        for r in range(args.rounds):
            for cap in caps if r % 2 == 0 else list(reversed(caps)):
                run(engine, cap, run_dir(args.root, engine, cap, r))
    dist.destroy_process_group()
    print(json.dumps({"rank": args.rank}))


def analyse(root, engine, rounds, caps):
    """(base error, {label: (predicted, measured, (low, high))}) from the traces of `engine`."""
    from ringx.analysis import whatif

    labels = [f"bucket_cap_mb={c:g}" for c in caps]
    predicted = {label: [] for label in labels}
    measured = {c: [] for c in caps}
    base_error, base = [], []
    for r in range(rounds):
        result = whatif(run_dir(root, engine, BASE_CAP, r), bounds=False, bucket_cap_mb=caps)
        base_error.append(result["baseline_error"])
        base.append(result["recorded_step_ns"])
        rows = {row["change"]: row for row in result["rows"]}
        for label in labels:
            predicted[label].append(rows[label]["predicted_step_ns"])
        for cap in caps:
            measured[cap].append(whatif(run_dir(root, engine, cap, r),
                                        bounds=False)["recorded_step_ns"])
    return statistics.median(base_error), statistics.median(base), {
        label: (statistics.median(predicted[label]), statistics.median(measured[cap]),
                (min(measured[cap]), max(measured[cap])))
        for label, cap in zip(labels, caps)}


def analyse_links(root, engine, rounds, rate, factors):
    """{label: (predicted, measured, (low, high))}: the base plan's step at each rate * factor,
    predicted from the base runs at `rate` (`--link`: the wire fitted from them, its bandwidth
    times the factor, its per-step cost kept) and measured at that rate."""
    from ringx.analysis import whatif

    out = {}
    for f in factors:
        predicted, measured = [], []
        for r in range(rounds):
            base = run_dir(root, engine, BASE_CAP, r)
            wire = whatif(base, bounds=False)["wire"]
            link = f"{f / wire['ns_per_byte']:.6g}:{wire['step_ns'] / 1e3:.6g}"
            rows = whatif(base, bounds=False, bucket_cap_mb=[BASE_CAP], link=[link])["rows"]
            predicted.append(next(row for row in rows if row["change"].startswith("link"))[
                "predicted_step_ns"])
            measured.append(whatif(run_dir(os.path.join(root, f"rate{rate * f:g}"), engine,
                                           BASE_CAP, r), bounds=False)["recorded_step_ns"])
        out[f"link {rate * f:g} Mbit/s"] = (statistics.median(predicted),
                                            statistics.median(measured),
                                            (min(measured), max(measured)))
    return out


BASE_ONLY = "-"  # --fsdp-changes: the base configuration alone


def fsdp_labels(text):
    """The FSDP configurations a rank runs, from --fsdp-changes (None: all; [] the base alone)."""
    if text == BASE_ONLY:
        return []
    return [label for label in text.split(";") if label] or None


def analyse_hosts(root, engine, rounds, hosts, counts):
    """{label: (predicted, measured, (low, high))}: the base configuration's step on each count
    of hosts, predicted from the base runs on `hosts` hosts of the same CPU share (`--world-size`)
    and measured on that many."""
    import whatif as one_host
    from ringx.analysis import whatif

    def base(where, r):
        return (one_host.base_dir(where, engine, FSDP_SHAPE, r) if engine in ("fsdp", "fsdp2")
                else run_dir(where, engine, BASE_CAP, r))

    out = {}
    for n in counts:
        predicted, measured = [], []
        for r in range(rounds):
            rows = whatif(base(os.path.join(root, f"hosts{hosts}"), r), bounds=False,
                          world_size=[n],
                          **({} if engine in ("fsdp", "fsdp2") else {"bucket_cap_mb": [BASE_CAP]}))
            predicted.append(next(row for row in rows["rows"]
                                  if row["change"] == f"world_size={n}")["predicted_step_ns"])
            measured.append(whatif(base(os.path.join(root, f"hosts{n}"), r),
                                   bounds=False)["recorded_step_ns"])
        out[f"{n} hosts"] = (statistics.median(predicted), statistics.median(measured),
                             (min(measured), max(measured)))
    return out


def report_fsdp(root, engine, rounds, labels, hosts, counts):
    """Prints an FSDP engine's table (bench/whatif.py's analysis of its runs, and the host
    counts'); its |errors|."""
    import whatif as one_host

    result = one_host.analyse_fsdp(root, rounds, engine, FSDP_SHAPE, labels)
    result["rows"] += [(label, p, m, spread, False) for label, (p, m, spread) in
                       analyse_hosts(root, engine, rounds, hosts, counts).items()]
    base = result["base_ns"]
    print(f"\n{ENGINES[engine]} on {FSDP_SHAPE}: base {base / 1e6:.1f} ms measured (the unchanged "
          f"replay {result['base_error'] * 100:+.1f}%), medians of {rounds} rounds")
    print(f"  {'change':34s} {'predicted':>10s} {'measured':>10s} {'error':>8s} {'rounds':>16s} "
          f"{'predicted move':>15s} {'measured move':>14s}")
    errors = []
    for label, p, m, (low, high), _ in result["rows"]:
        errors.append(abs(p / m - 1))
        print(f"  {label:34s} {p / 1e6:7.1f} ms {m / 1e6:7.1f} ms {(p / m - 1) * 100:+7.1f}% "
              f"{low / 1e6:6.1f}-{high / 1e6:6.1f} ms {(p / base - 1) * 100:+14.1f}% "
              f"{(m / base - 1) * 100:+13.1f}%")
    return errors


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--rate-mbit", type=float, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpus-per-host", type=float, default=CPUS_PER_HOST,
                        help="each host's CPU, a share of one core (0: the machine's, shared)")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--engines", default="torch-ddp,ddp,fsdp,fsdp2")
    parser.add_argument("--link-factors", default="0.25,0.5,2",
                        help="the base plan also run at the rate times each (empty: none)")
    parser.add_argument("--host-counts", default="3,4",
                        help="the base also run on each of these counts of hosts (empty: none)")
    parser.add_argument("--quick", action="store_true", help="2 hosts, one change per engine")
    parser.add_argument("--traces", help="keep the traces here (default: deleted)")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    import netns_hosts

    if netns_hosts.bench_skipped("whatif_linked", args.docs, netns_hosts.why_unshaped):
        return 0
    engines, caps, rounds, steps = args.engines.split(","), CAPS, args.rounds, args.steps
    factors = [float(f) for f in args.link_factors.split(",") if f]
    counts = [int(n) for n in args.host_counts.split(",") if n]
    fsdp_changes = ""
    if args.quick:
        caps, rounds, steps, factors, counts = QUICK_CAPS, 1, 8, QUICK_LINK_FACTORS, []
        fsdp_changes = ";".join(QUICK[e] for e in ("fsdp", "fsdp2") if e in engines)
    names = [chr(ord("a") + i) for i in range(args.hosts)]
    with tempfile.TemporaryDirectory(prefix="ringx-whatif-linked-") as scratch, \
            docs_table.table(args.docs and not args.quick, "whatif-linked"):
        print(f"{args.hosts} hosts, one rank each, every link shaped to {args.rate_mbit:g} Mbit/s; "
              f"{LAYERS} x Linear({WIDTH}), batch {args.batch}, over ringx; base "
              f"bucket_cap_mb={BASE_CAP}")
        cpus = args.cpus_per_host or None
        why = netns_hosts.why_no_cpu_share() if cpus and counts else None
        if why is not None:
            print(f"the host rows' hosts share this machine's cores: {why}")
            cpus = None
        elif cpus and counts:
            print(f"host rows: each host {cpus:g} of a core of its own (a CFS quota), on 2 "
                  f"hosts and on {', '.join(map(str, counts))}")
        root = args.traces or scratch
        with netns_hosts.Hosts(names, rate_mbit=args.rate_mbit) as hosts:
            expected = args.rate_mbit * netns_hosts.TCP_PAYLOAD_SHARE
            carried = hosts.iperf(names[0], names[1], 2, enough=0.95 * expected)
            print(f"link: iperf3 carried {carried:.1f} Mbit/s of TCP payload, the rate's share "
                  f"{expected:.1f} ({(carried / expected - 1) * 100:+.1f}%)")
            env = dict(os.environ, OMP_NUM_THREADS="1")
            init = f"tcp://{hosts.address[names[0]]}:29500"
            def job(where, asked, which, on=names, configurations=None):
                hosts.run(os.path.abspath(__file__), on, lambda r: [
                    "--rank", str(r), "--world", str(len(on)), "--batch", str(args.batch),
                    "--init", init, "--root",
                    where, "--rounds", str(rounds), "--steps", str(steps), "--engines",
                    ",".join(which), "--caps", ",".join(f"{c:g}" for c in asked),
                    "--fsdp-changes", configurations or fsdp_changes], env, timeout=1800)

            job(root, caps, engines)
        # The DDP engines' base plan at other rates, each on its own links.
        ddp_engines = [e for e in engines if e in ("torch-ddp", "ddp")]
        for f in factors if ddp_engines else []:
            with netns_hosts.Hosts(names, rate_mbit=args.rate_mbit * f) as hosts:
                init = f"tcp://{hosts.address[names[0]]}:29500"
                job(os.path.join(root, f"rate{args.rate_mbit * f:g}"), [], ddp_engines)
        # Every engine's base on 2 hosts and on more, each host with its CPU share.
        for n in [args.hosts] + counts if counts else []:
            more = [chr(ord("a") + i) for i in range(n)]
            with netns_hosts.Hosts(more, rate_mbit=args.rate_mbit, cpus=cpus) as hosts:
                init = f"tcp://{hosts.address[more[0]]}:29500"
                job(os.path.join(root, f"hosts{n}"), [], engines, more, BASE_ONLY)
        errors = []
        for engine in engines:
            if engine in ("fsdp", "fsdp2"):
                errors += report_fsdp(root, engine, rounds, fsdp_labels(fsdp_changes), args.hosts,
                                      counts)
                continue
            base_error, base, rows = analyse(root, engine, rounds, caps)
            rows.update(analyse_links(root, engine, rounds, args.rate_mbit, factors))
            rows.update(analyse_hosts(root, engine, rounds, args.hosts, counts))
            print(f"\n{ENGINES[engine]}: base bucket_cap_mb={BASE_CAP} {base / 1e6:.1f} ms measured "
                  f"(the unchanged replay {base_error * 100:+.1f}%), medians of {rounds} rounds")
            print(f"  {'change':22s} {'predicted':>10s} {'measured':>10s} {'error':>8s} "
                  f"{'rounds':>16s} {'predicted move':>15s} {'measured move':>14s}")
            for label, (p, m, (low, high)) in rows.items():
                errors.append(abs(p / m - 1))
                print(f"  {label:22s} {p / 1e6:7.1f} ms {m / 1e6:7.1f} ms {(p / m - 1) * 100:+7.1f}% "
                      f"{low / 1e6:6.1f}-{high / 1e6:6.1f} ms {(p / base - 1) * 100:+14.1f}% "
                      f"{(m / base - 1) * 100:+13.1f}%")
        print(f"\nmedian |error| {statistics.median(errors) * 100:.1f}%, "
              f"worst {max(errors) * 100:.1f}% over {len(errors)} cases")
    return 0


if __name__ == "__main__":
    if "--rank" in sys.argv:
        rank_main(sys.argv[1:])
    else:
        sys.exit(main())
