#!/usr/bin/env python3
"""What-if predictions checked against real runs: ringx-trace whatif's predicted step time beside
the step time of the same change run for real, on the same machine, in alternating rounds.

    PYTHONPATH=build/python .venv/bin/python bench/whatif.py [--world-sizes 2,3] [--rounds 3] [--docs]
    ... bench/whatif.py --traces DIR        keep the traces (DIR/world<N>/...)
    ... bench/whatif.py --reanalyse DIR     predict again from kept traces, running nothing: the
                                            replay before and after a change, on the same runs

For each DDP sample model of bench/ddp.py, and a communication-bound one (wide layers, tiny
batch), and each world size, every rank holds one ringx group
and, in every round, trains a fresh ringx.ddp wrapper of the model for --steps steps under each
configuration in turn, tracing each run into a directory of its own: the recorded plan (base,
bucket_cap_mb=25, torch's default) and the alternatives (bucket caps from 0.25 to 16 MB,
gradient_as_bucket_view=True). Then, per round, `ringx-trace whatif` (ringx.analysis.whatif)
predicts every alternative from that round's base trace, and each alternative's own trace gives
its measured step (the same definition as the recorded one: the median over steps of forward
begin to the next forward begin, slowest rank). Printed per alternative: the median over rounds
of predicted and measured, the range of the rounds' measurements, and the error = predicted /
measured - 1. A miss over 5% that measured noise explains says so: "noise" when the prediction
lies inside that range (the same change, run again, landed on both sides of it), "same plan as
the base" when the change ran the base's own bucket plan (a cap above the model's gradients:
whatever it measured apart from the base is the machine's). The summary counts the misses over
10% so explained apart from the rest.

FSDP: two transformer-like stacks (bench/fsdp.py's blocks, grouped in pairs: 8 blocks of d=256 and
16 of d=128; --quick runs the first) under ringx.fsdp on the default ringx group (so gathers have
their own lane), every block a unit; the base run is
FULL_SHARD with the defaults, the alternatives are the other strategies, backward prefetch modes,
forward prefetch, no rate limiter, and the pairs as units (auto_wrap_policy={Pair}: the replay's
"units merged by 2"), each predicted from the base run's trace and run for real the same way.
Goals (issue 33): median |error| <= 5% and every case <= 10%.

torch's own engines (issue 49: ringx watches them while tracing), --engines torch-ddp,fsdp2:
torch's DistributedDataParallel on the same models, base and alternatives as above (no "auto");
and FSDP2 (fully_shard on every block and the root, the defaults) with the alternatives FSDP2
has: reshard_after_forward=False, explicit forward prefetch of the next block, and the pairs as
units (ringx-trace whatif names FSDP2's changes in fully_shard's terms).

--from-profiler (issue 65): torch's DDP on the same models over --backends (gloo, ringx), every
run profiled by torch.profiler (CPU, record_shapes=True, a folder per run as
tensorboard_trace_handler writes it) and traced by ringx at once. Each change is predicted from
the base run's profiler folder alone (the job carried nothing of ringx: analysis/profiler_ddp.h
recovers DDP's buckets from it) and, beside it, from ringx's trace of the same base run; the
change's run measures the step (its ringx trace, the same definition). With --engines fsdp2
(or both: torch-ddp,fsdp2), FSDP2 on the first FSDP model the same way: its alternatives above,
each predicted from the base run's profiler folder alone (analysis/profiler_fsdp.h recovers
its units from FSDP2's scopes) and from ringx's trace of the same run; its own table
(docs marker whatif-profiler-fsdp2).
"""

import argparse
import datetime
import functools
import json
import os
import statistics
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn

import docs_table
from bench_ranks import run_ranks
from ddp import MODELS, mlp, mlp_batch
from fsdp import DIM, Block, Net


# Communication-bound: 8 layers of 1024x1024 (32 MiB of gradients) on 4 samples a step, so that
# the bucket plan decides how much of the allreduce hides behind backward.
MODELS = dict(MODELS, **{"mlp 8x1024, batch 4": (functools.partial(mlp, 1024, 8),
                                                 functools.partial(mlp_batch, rows=4, width=1024))})
BASE = ("bucket_cap_mb=25", 25.0, False)
ALTERNATIVES = [(f"bucket_cap_mb={cap:g}", cap, False) for cap in (0.25, 0.5, 1, 2, 4, 8, 16)]
ALTERNATIVES.append(("gradient_as_bucket_view=True", 25.0, True))
# Not predicted: ringx.ddp choosing its own cap, measured beside the best fixed cap of the sweep.
AUTO = ("bucket_cap_mb=auto", "auto", False)


class Pair(nn.Module):
    """Two blocks: wrapping Pair instead of Block makes units of two blocks."""

    def __init__(self, dim=DIM):
        super().__init__()
        self.first = Block(dim)
        self.second = Block(dim)

    def forward(self, x):
        return self.second(self.first(x))


# The FSDP engines' models: name -> (d, pairs of blocks). The first (2 MiB units, compute and
# wire about even) and a deeper, narrower one (16 units of 512 KiB: every collective short,
# each step's many hooks and launches weigh more). --quick runs the first only.
FSDP_SHAPES = {"8 blocks of d=256": (DIM, 4), "16 blocks of d=128": (128, 8)}


def pair_net(shape):
    dim, pairs = FSDP_SHAPES[shape]
    net = Net(dim=dim, blocks=0)
    net.blocks = nn.Sequential(*[Pair(dim) for _ in range(pairs)])
    return net


FSDP_BATCH = 32  # rows per rank
FSDP_BASE = ("FULL_SHARD, defaults", {}, Block)
FSDP_ALTERNATIVES = [
    ("sharding_strategy=SHARD_GRAD_OP", dict(sharding_strategy="SHARD_GRAD_OP"), Block),
    ("sharding_strategy=NO_SHARD", dict(sharding_strategy="NO_SHARD"), Block),
    ("backward_prefetch=BACKWARD_POST", dict(backward_prefetch="BACKWARD_POST"), Block),
    ("backward_prefetch=NONE", dict(backward_prefetch=None), Block),
    ("forward_prefetch=True", dict(forward_prefetch=True), Block),
    ("limit_all_gathers=False", dict(limit_all_gathers=False), Block),
    ("units merged by 2", {}, Pair),
]


# FSDP2's alternatives: the what-if row's label, fully_shard's reshard_after_forward, whether
# every block prefetches the next in forward, and the module class that makes a unit.
FSDP2_BASE = ("FULL_SHARD, defaults", True, False, Block)
FSDP2_ALTERNATIVES = [
    ("reshard_after_forward=False", False, False, Block),
    ("forward prefetch of the next unit", True, True, Block),
    ("units merged by 2", True, False, Pair),
]


def ddp_wrapper(engine, model, cap, view):
    if engine == "torch-ddp":
        return nn.parallel.DistributedDataParallel(model, bucket_cap_mb=cap,
                                                   gradient_as_bucket_view=view)
    from ringx.ddp import DistributedDataParallel as RingxDDP
    return RingxDDP(model, bucket_cap_mb=cap, gradient_as_bucket_view=view)


def worker(rank, world, init, root, rounds, steps, engines, shapes, results):
    import ringx

    dist.init_process_group("ringx", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    generator = torch.Generator().manual_seed(rank)
    chosen = {}
    for engine in [e for e in engines if e in ("fsdp", "fsdp2")]:
        for shape in shapes:
            fsdp_runs(root, rounds, steps, generator, engine, shape)
    for engine in [e for e in engines if e in ("ddp", "torch-ddp")]:
        ddp_runs(engine, root, rounds, steps, generator, chosen)
    results[rank] = chosen
    dist.destroy_process_group()


def ddp_runs(engine, root, rounds, steps, generator, chosen):
    """Every DDP configuration of every model under `engine` for `steps` steps per round,
    alternating the order, each traced into its run_dir(); ringx.ddp's bucket_cap_mb="auto"
    choices go into `chosen`."""
    import ringx

    for model_name, (make_model, make_batch) in MODELS.items():
        x, y = make_batch(generator)
        for r in range(rounds):
            configs = [BASE] + ALTERNATIVES + ([AUTO] if engine == "ddp" else [])
            if r % 2:
                configs.reverse()  # alternate the order: no configuration always runs first
            for label, cap, view in configs:
                torch.manual_seed(0)
                ddp = ddp_wrapper(engine, make_model(), cap, view)
                opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
                dist.barrier()
                # The base run, which predictions are made from, calibrates the wire first.
                ringx.trace.start(dir=run_dir(root, engine, model_name, label, r),
                                  calibrate=label == BASE[0])
                for _ in range(steps):
                    opt.zero_grad()
                    nn.functional.mse_loss(ddp(x), y).backward()
                    opt.step()
                ringx.trace.stop()
                if cap == "auto":
                    chosen.setdefault(model_name, []).append(ddp.auto_choice())
                del ddp, opt


def run_dir(root, engine, model_name, label, r):
    """Where one run of `engine` on `model_name` (a DDP model or an FSDP shape) under the
    configuration `label` traces in round r: ringx.ddp's at the top of the root, as before."""
    return os.path.join(root, "" if engine == "ddp" else engine, model_name, label, f"round{r}")


def ringx_fsdp_model(config, shape):
    """ringx.fsdp over pair_net(shape) with one of FSDP_BASE / FSDP_ALTERNATIVES."""
    from ringx.fsdp import FullyShardedDataParallel as FSDP
    _, kwargs, unit = config
    return FSDP(pair_net(shape), auto_wrap_policy={unit}, **kwargs)


def fsdp2_model(config, shape):
    """pair_net(shape) under FSDP2 (fully_shard on every `unit` module and the root) with one of
    FSDP2_BASE / FSDP2_ALTERNATIVES."""
    from torch.distributed.fsdp import fully_shard
    _, reshard, prefetch, unit = config
    model = pair_net(shape)
    units = [m for m in model.modules() if isinstance(m, unit)]
    for m in units:
        fully_shard(m, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    if prefetch:
        for here, after in zip(units, units[1:]):
            here.set_modules_to_forward_prefetch([after])
    return model


def fsdp_alternatives(engine, labels=None):
    """`engine`'s alternative configurations (fsdp: ringx.fsdp, fsdp2: torch's), those of
    `labels` where given."""
    every = FSDP_ALTERNATIVES if engine == "fsdp" else FSDP2_ALTERNATIVES
    return [a for a in every if labels is None or a[0] in labels]


def fsdp_runs(root, rounds, steps, generator, engine, shape, labels=None):
    """The base and every alternative configuration of `engine` (those of `labels` where given)
    on the model `shape` for `steps` steps per round, alternating the order, each traced into
    root/<engine>/<shape>/<label>/round<r>."""
    import ringx

    base, build = (FSDP_BASE, ringx_fsdp_model) if engine == "fsdp" else (FSDP2_BASE, fsdp2_model)
    alternatives = fsdp_alternatives(engine, labels)
    dim = FSDP_SHAPES[shape][0]
    x = torch.randn(FSDP_BATCH, dim, generator=generator)
    y = torch.randn(FSDP_BATCH, dim, generator=generator)
    for r in range(rounds):
        configs = [base] + alternatives
        if r % 2:
            configs.reverse()
        for config in configs:
            torch.manual_seed(0)
            model = build(config, shape)
            opt = torch.optim.SGD(model.parameters(), lr=1e-3)
            dist.barrier()
            ringx.trace.start(dir=run_dir(root, engine, shape, config[0], r),
                              calibrate=config is base)
            for _ in range(steps):
                opt.zero_grad(set_to_none=True)
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            ringx.trace.stop()
            del model, opt


def analyse_fsdp(root, rounds, engine, shape, labels=None):
    """{"base_error", "base_ns", "rows": [(label, predicted_ns, measured_ns)]} from the FSDP (or
    FSDP2) traces of the model `shape` (the alternatives of `labels` where given)."""
    from ringx.analysis import whatif

    labels = [a[0] for a in fsdp_alternatives(engine, labels)]
    predicted = {label: [] for label in labels}
    measured = {label: [] for label in labels}
    base_error, base_ns = [], []
    for r in range(rounds):
        base = whatif(base_dir(root, engine, shape, r),
                      sharding_strategy=["SHARD_GRAD_OP", "NO_SHARD"],
                      backward_prefetch=["BACKWARD_POST", "NONE"], forward_prefetch=True,
                      limit_all_gathers=False, merge_units=2, bounds=False)
        base_error.append(base["baseline_error"])
        base_ns.append(base["recorded_step_ns"])
        rows = {row["change"]: row for row in base["rows"]}
        for label in labels:
            predicted[label].append(rows[label]["predicted_step_ns"])
            measured[label].append(measured_step(root, engine, shape, label, r))
    return {"base_error": statistics.median(base_error), "base_ns": statistics.median(base_ns),
            "rows": [row(label, predicted[label], measured[label]) for label in labels]}


def row(label, predicted, measured, same_plan=False):
    """A printed case: (label, predicted_ns, measured_ns, (fastest, slowest) round measured,
    same_plan), medians over the rounds; same_plan: every round of the change ran the base's
    bucket plan (a cap above the model's gradients), so what it measured apart from the base is
    the machine's noise."""
    return (label, statistics.median(predicted), statistics.median(measured),
            (min(measured), max(measured)), same_plan)


def measured_step(root, engine, model_name, label, r):
    """A run's step as its trace records it (after its last bucket plan or FSDP schedule change)."""
    return measured_run(root, engine, model_name, label, r)[0]


def measured_run(root, engine, model_name, label, r):
    """(step_ns, plan) of a run's trace: plan is the DDP bucket plan it ran (bucket sizes and
    gradient_as_bucket_view), None for FSDP."""
    from ringx.analysis import whatif
    result = whatif(run_dir(root, engine, model_name, label, r), bounds=False)
    return result["recorded_step_ns"], plan_of(result)


def plan_of(result):
    """The DDP bucket plan a whatif result recorded (bucket sizes, gradient_as_bucket_view);
    None for FSDP."""
    if "bucket_bytes" not in result["baseline"]:
        return None
    return tuple(result["baseline"]["bucket_bytes"]), result["gradient_as_bucket_view"]


def analyse(root, rounds, engine="ddp"):
    """{model: {"base_error", "rows": [(label, predicted_ns, measured_ns)], "measured": {label:
    ns}}} from the traces of `engine` (ddp: ringx.ddp, torch-ddp: torch's) under root."""
    from ringx.analysis import whatif

    caps = [cap for label, cap, view in ALTERNATIVES if not view]
    table = {}
    for model_name in MODELS:
        predicted = {label: [] for label, _, _ in ALTERNATIVES}
        measured = {label: [] for label, _, _ in ALTERNATIVES}
        base_error, base_steps = [], []
        other_plan = set()
        for r in range(rounds):
            base = whatif(base_dir(root, engine, model_name, r), bucket_cap_mb=caps,
                          gradient_as_bucket_view=True, bounds=False)
            base_error.append(base["baseline_error"])
            base_steps.append(base["recorded_step_ns"])
            rows = {row["change"]: row for row in base["rows"]}
            base_plan = plan_of(base)
            for label, _, _ in ALTERNATIVES:
                predicted[label].append(rows[label]["predicted_step_ns"])
                step, plan = measured_run(root, engine, model_name, label, r)
                measured[label].append(step)
                if plan != base_plan:
                    other_plan.add(label)
        table[model_name] = {
            "base_error": statistics.median(base_error),
            "measured": {BASE[0]: base_steps, **({AUTO[0]: [
                measured_step(root, engine, model_name, AUTO[0], r) for r in range(rounds)]}
                if engine == "ddp" else {})},
            "rows": [row(label, predicted[label], measured[label], label not in other_plan)
                     for label, _, _ in ALTERNATIVES]}
    return table


def base_dir(root, engine, model_name, r):
    """The base run's trace of `engine` on `model_name` in round r."""
    return run_dir(root, engine, model_name,
                   FSDP_BASE[0] if engine in ("fsdp", "fsdp2") else BASE[0], r)


def analyse_world_sizes(roots, rounds, engines, shapes):
    """--world-size checked against real runs: every world's base trace predicts the base run
    at every other world size of the bench, beside that run's measured step (medians over the
    rounds). {(engine, model): [(from, to, predicted_ns, measured_ns)]}."""
    from ringx.analysis import whatif

    out = {}
    for engine in engines:
        models = shapes if engine in ("fsdp", "fsdp2") else list(MODELS)
        for model_name in models:
            rows = []
            for w_from in roots:
                for w_to in roots:
                    if w_to == w_from:
                        continue
                    predicted = [
                        {row["change"]: row for row in whatif(
                            base_dir(roots[w_from], engine, model_name, r), world_size=[w_to],
                            bounds=False)["rows"]}[f"world_size={w_to}"]["predicted_step_ns"]
                        for r in range(rounds)]
                    measured = [whatif(base_dir(roots[w_to], engine, model_name, r),
                                       bounds=False)["recorded_step_ns"] for r in range(rounds)]
                    rows.append((w_from, w_to, predicted, measured))
            if rows:
                out[(engine, model_name)] = rows
    return out


def report_world_sizes(worlds, args):
    errors = []
    for (engine, model_name), rows in worlds.items():
        print(f"\n{ENGINE_NAMES[engine]}, {model_name}: --world-size predicted from one world's base "
              f"trace, measured at the other's base run, medians of {args.rounds} rounds")
        print_rows([row(f"{w_from} ranks -> {w_to}", pred, meas)
                    for w_from, w_to, pred, meas in rows], 30, errors)
    if errors:
        print(f"\n--world-size: {summary(errors)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--world-sizes", default="2,3")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30,
                        help="steps per run (the first 16 record gradient readiness)")
    parser.add_argument("--engines", default="ddp,fsdp",
                        help="any of ddp, fsdp (ringx's engines), torch-ddp, fsdp2 (torch's)")
    parser.add_argument("--traces", help="keep the traces in this directory (default: deleted)")
    parser.add_argument("--reanalyse", metavar="DIR",
                        help="analyse the traces a run kept in DIR (--traces) without running")
    parser.add_argument("--quick", action="store_true", help="one round of 20 steps")
    parser.add_argument("--from-profiler", action="store_true",
                        help="torch DDP predicted from torch.profiler traces (see above)")
    parser.add_argument("--backends", default="gloo,ringx",
                        help="--from-profiler: the jobs' backends")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps = 1, 20
    if args.from_profiler:
        if args.engines == parser.get_default("engines"):
            args.engines = "torch-ddp,fsdp2"
        if args.docs:
            markers = {"torch-ddp": "whatif-profiler", "fsdp2": "whatif-profiler-fsdp2"}
            docs_table.require(*[markers[e] for e in args.engines.split(",") if e in markers])
        return main_from_profiler(args)
    if args.docs:
        docs_table.require("whatif")
    engines = args.engines.split(",")
    tables, fsdp_tables = {}, {}  # {(engine, world): ...}, {(engine, world, shape): ...}
    shapes = list(FSDP_SHAPES)[:1] if args.quick else list(FSDP_SHAPES)
    roots = {}  # world -> its traces
    with tempfile.TemporaryDirectory(prefix="ringx-whatif-") as scratch:
        for world in [int(w) for w in args.world_sizes.split(",")]:
            kept = args.reanalyse or args.traces
            root = os.path.join(kept or scratch, f"world{world}")
            roots[world] = root
            choices = os.path.join(root, "auto_choices.json")
            if args.reanalyse:
                chosen = json.load(open(choices)) if os.path.exists(choices) else {}
            else:
                chosen = run_ranks(worker, world, root, args.rounds, args.steps, engines, shapes,
                                   name="whatif")
                json.dump(chosen, open(choices, "w"))
            for engine in [e for e in engines if e in ("ddp", "torch-ddp")]:
                tables[(engine, world)] = analyse(root, args.rounds, engine)
                for model_name, reasons in (chosen.items() if engine == "ddp" else ()):
                    tables[(engine, world)][model_name]["auto"] = reasons
            for engine in [e for e in engines if e in ("fsdp", "fsdp2")]:
                for shape in shapes:
                    fsdp_tables[(engine, world, shape)] = analyse_fsdp(root, args.rounds, engine,
                                                                       shape)
        worlds = analyse_world_sizes(roots, args.rounds, engines, shapes)
    with docs_table.table(args.docs, "whatif"):
        report(tables, fsdp_tables, args)
        report_world_sizes(worlds, args)
    return 0


def print_rows(rows, width, errors):
    """One line per row(): predicted, measured (the median round), the rounds' range and the
    error; each (|error|, cause) appended to errors, cause naming the measured noise that explains
    the miss or "": "noise" for a prediction inside the range of the rounds' measurements (the
    same change run again landed on both sides of it), "same plan as the base" for a change that
    ran the base's own bucket plan."""
    print(f"  {'change':{width}s} {'predicted':>11s} {'measured':>11s} {'rounds':>15s} "
          f"{'error':>8s}")
    for label, pred, meas, (low, high), same_plan in rows:
        error = pred / meas - 1
        cause = "noise" if low <= pred <= high else "same plan as the base" if same_plan else ""
        errors.append((abs(error), cause))
        print(f"  {label:{width}s} {pred / 1e6:9.2f} ms {meas / 1e6:9.2f} ms "
              f"{low / 1e6:6.1f}-{high / 1e6:5.1f} ms {error * 100:+7.1f}%"
              f"{'  ' + cause if cause and abs(error) > NOISE_MARK else ''}")


# Rows with a larger |error| than this say whether the rounds' range explains it.
NOISE_MARK = 0.05


def summary(errors):
    """The line for a list of print_rows' (|error|, cause): median and worst, and the worst
    among the cases no measured noise explains."""
    magnitudes = [e for e, _ in errors]
    line = (f"{len(errors)} cases, median |error| {statistics.median(magnitudes) * 100:.1f}% "
            f"(goal <= 5%), worst {max(magnitudes) * 100:.1f}% (goal <= 10%)")
    noise = sum(1 for e, cause in errors if cause == "noise" and e > 0.10)
    same = sum(1 for e, cause in errors if cause == "same plan as the base" and e > 0.10)
    if noise or same:
        said = [f"{noise} inside their rounds' range"] if noise else []
        said += [f"{same} that ran the base's own plan"] if same else []
        unexplained = max((e for e, cause in errors if not cause), default=0)
        line += (f"; of those over 10%, {' and '.join(said)} (measurement noise); worst "
                 f"of the rest {unexplained * 100:.1f}%")
    return line


ENGINE_NAMES = {"ddp": "ringx.ddp", "torch-ddp": "torch DDP", "fsdp": "ringx.fsdp",
                "fsdp2": "FSDP2"}


def profiled_steps(where, rank, steps, model, opt, x, y):
    """`steps` steps of `model`, profiled by torch.profiler into <where>-profile (the first
    two not: the first builds DDP's buckets again in readiness order) and traced by ringx into
    <where>."""
    import ringx
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    dist.barrier()
    ringx.trace.start(dir=where)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=1, warmup=1, active=steps - 2),
                 on_trace_ready=tensorboard_trace_handler(
                     where + "-profile", worker_name=f"rank{rank}")) as prof:
        for _ in range(steps):
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            prof.step()
    ringx.trace.stop()


# --from-profiler's FSDP2 model.
PROFILED_FSDP2_SHAPE = list(FSDP_SHAPES)[0]


def profiler_worker(rank, world, init, root, rounds, steps, backend, engines, results):
    """--from-profiler: torch DDP (and FSDP2) over `backend`, every configuration of every
    model per round (alternating the order), each run profiled_steps()."""
    import ringx  # noqa: F401 (the backend)

    dist.init_process_group(backend, init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=300))
    generator = torch.Generator().manual_seed(rank)
    if "fsdp2" in engines:
        shape = PROFILED_FSDP2_SHAPE
        dim = FSDP_SHAPES[shape][0]
        x = torch.randn(FSDP_BATCH, dim, generator=generator)
        y = torch.randn(FSDP_BATCH, dim, generator=generator)
        for r in range(-1, rounds):  # round -1: the base, to warm up, not analysed
            configs = [FSDP2_BASE] + (FSDP2_ALTERNATIVES if r >= 0 else [])
            if r % 2:
                configs.reverse()
            for config in configs:
                torch.manual_seed(0)
                model = fsdp2_model(config, shape)
                opt = torch.optim.SGD(model.parameters(), lr=1e-3)
                profiled_steps(run_dir(root, backend + "-fsdp2", shape, config[0], r), rank,
                               steps, model, opt, x, y)
                del model, opt
    for model_name, (make_model, make_batch) in MODELS.items():
        if "torch-ddp" not in engines:
            break
        x, y = make_batch(generator)
        # A run of the base untraced first: the model's first run pays for warming up (the
        # allocator, gloo's buffers), which no configuration of the rounds should.
        torch.manual_seed(0)
        ddp = ddp_wrapper("torch-ddp", make_model(), BASE[1], BASE[2])
        opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
        for _ in range(steps):
            opt.zero_grad()
            nn.functional.mse_loss(ddp(x), y).backward()
            opt.step()
        del ddp, opt
        for r in range(rounds):
            configs = [BASE] + ALTERNATIVES
            if r % 2:
                configs.reverse()
            for label, cap, view in configs:
                torch.manual_seed(0)
                ddp = ddp_wrapper("torch-ddp", make_model(), cap, view)
                opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
                profiled_steps(run_dir(root, backend, model_name, label, r), rank, steps, ddp,
                               opt, x, y)
                del ddp, opt
    results[rank] = {}
    dist.destroy_process_group()


def analyse_profiled(root, rounds, backend):
    """{model: {"base_error": (profiler's, ringx's), "rows": [(label, from profiler, from ringx
    trace, measured, (low, high))]}}: every change predicted from the base run's profiler folder
    and from its ringx trace, beside the change's measured step, medians over the rounds."""
    caps = [cap for label, cap, view in ALTERNATIVES if not view]
    return {model_name: profiled_rows(
        lambda label, r: run_dir(root, backend, model_name, label, r), BASE[0],
        [label for label, _, _ in ALTERNATIVES], rounds,
        dict(bucket_cap_mb=caps, gradient_as_bucket_view=True)) for model_name in MODELS}


def analyse_profiled_fsdp2(root, rounds, backend):
    """analyse_profiled()'s table for FSDP2 on PROFILED_FSDP2_SHAPE."""
    shape = PROFILED_FSDP2_SHAPE
    return {shape: profiled_rows(
        lambda label, r: run_dir(root, backend + "-fsdp2", shape, label, r), FSDP2_BASE[0],
        [a[0] for a in FSDP2_ALTERNATIVES], rounds,
        dict(sharding_strategy=["SHARD_GRAD_OP"], forward_prefetch=True, merge_units=2))}


def profiled_rows(run_of, base_label, labels, rounds, changes):
    """One model's entry of analyse_profiled()'s table: each change of `labels` (asked of
    whatif with `changes`) predicted from the base run's profiler folder and from its ringx
    trace, beside the change's measured step; run_of(label, round) is a run's folder."""
    from ringx.analysis import whatif

    predicted = {source: {label: [] for label in labels} for source in ("profiler", "ringx")}
    measured = {label: [] for label in labels}
    base_error = {"profiler": [], "ringx": []}
    for r in range(rounds):
        base = run_of(base_label, r)
        for source, path in (("profiler", base + "-profile"), ("ringx", base)):
            # The profiler does not record the host's cores: the job ran on this one.
            result = whatif(path, bounds=False,
                            host_cores=os.cpu_count() if source == "profiler" else None,
                            **changes)
            base_error[source].append(result["baseline_error"])
            rows = {row["change"]: row for row in result["rows"]}
            for label in labels:
                predicted[source][label].append(rows[label]["predicted_step_ns"])
        for label in labels:
            measured[label].append(whatif(run_of(label, r), bounds=False)["recorded_step_ns"])
    return {
        "base_error": tuple(statistics.median(base_error[s]) for s in ("profiler", "ringx")),
        "rows": [(label, statistics.median(predicted["profiler"][label]),
                  statistics.median(predicted["ringx"][label]), statistics.median(measured[label]),
                  (min(measured[label]), max(measured[label]))) for label in labels]}


def report_profiled(tables, args):
    errors = {"profiler": [], "ringx": []}
    engine = "torch DDP"
    for (engine, backend, world), table in tables.items():
        base_label = BASE[0] if engine == "torch DDP" else FSDP2_BASE[0]
        for model_name, result in table.items():
            profiler_base, ringx_base = result["base_error"]
            print(f"\n{engine} over {backend}, {model_name}, {world} ranks: predicted from the "
                  f"{base_label} run's torch.profiler folder (its replay's own error "
                  f"{profiler_base * 100:+.1f}%) and from ringx's trace of the same run "
                  f"({ringx_base * 100:+.1f}%), medians of {args.rounds} rounds")
            print(f"  {'change':30s} {'profiler':>11s} {'ringx trace':>12s} {'measured':>11s} "
                  f"{'rounds':>15s} {'error':>8s} {'ringx err':>10s}")
            for label, from_profiler, from_ringx, meas, (low, high) in result["rows"]:
                e_prof, e_ringx = from_profiler / meas - 1, from_ringx / meas - 1
                cause = "noise" if low <= from_profiler <= high else ""
                errors["profiler"].append((abs(e_prof), cause))
                errors["ringx"].append(
                    (abs(e_ringx), "noise" if low <= from_ringx <= high else ""))
                print(f"  {label:30s} {from_profiler / 1e6:8.2f} ms {from_ringx / 1e6:9.2f} ms "
                      f"{meas / 1e6:8.2f} ms {low / 1e6:6.1f}-{high / 1e6:5.1f} ms "
                      f"{e_prof * 100:+7.1f}% {e_ringx * 100:+9.1f}%"
                      f"{'  ' + cause if cause and abs(e_prof) > NOISE_MARK else ''}")
    for source, name in (("profiler", "from torch.profiler traces"),
                         ("ringx", "from ringx traces of the same runs")):
        if errors[source]:
            print(f"\n{engine} predicted {name}: {summary(errors[source])}")


def main_from_profiler(args):
    engines = [e for e in args.engines.split(",") if e in ("torch-ddp", "fsdp2")]
    if not engines:
        raise SystemExit("--from-profiler runs torch's engines: --engines torch-ddp and/or fsdp2")
    ddp_tables, fsdp2_tables = {}, {}
    with tempfile.TemporaryDirectory(prefix="ringx-whatif-profiler-") as scratch:
        for world in [int(w) for w in args.world_sizes.split(",")]:
            for backend in args.backends.split(","):
                root = os.path.join(args.reanalyse or args.traces or scratch, f"world{world}")
                if not args.reanalyse:
                    run_ranks(profiler_worker, world, root, args.rounds, args.steps, backend,
                              engines, name="whatif --from-profiler")
                if "torch-ddp" in engines:
                    ddp_tables[("torch DDP", backend, world)] = analyse_profiled(
                        root, args.rounds, backend)
                if "fsdp2" in engines:
                    fsdp2_tables[("FSDP2", backend, world)] = analyse_profiled_fsdp2(
                        root, args.rounds, backend)
    for tables, marker in ((ddp_tables, "whatif-profiler"), (fsdp2_tables, "whatif-profiler-fsdp2")):
        if tables:
            with docs_table.table(args.docs, marker):
                report_profiled(tables, args)
    return 0


def report(tables, fsdp_tables, args):
    errors, base_errors = {}, {}
    for (engine, world), table in tables.items():
        for model_name, result in table.items():
            base_errors.setdefault(engine, []).append(abs(result["base_error"]))
            print(f"\n{ENGINE_NAMES[engine]}, {model_name}, {world} ranks: predicted from the "
                  f"{BASE[0]} run's trace (its replay's own error "
                  f"{result['base_error'] * 100:+.1f}%), medians of {args.rounds} rounds")
            print_rows(result["rows"], 30, errors.setdefault(engine, []))
            if "auto" not in result and AUTO[0] not in result["measured"]:
                continue
            # bucket_cap_mb="auto" beside the sweep's best fixed cap and torch's default, measured.
            fixed = {label: meas for label, _, meas, *_ in result["rows"]
                     if label.startswith("bucket")}
            fixed[BASE[0]] = statistics.median(result["measured"][BASE[0]])
            best = min(fixed, key=fixed.get)
            autos, defaults = result["measured"][AUTO[0]], result["measured"][BASE[0]]
            auto = statistics.median(autos)
            picks = sorted({reason.split(" ")[0] for reason in result.get("auto", ["?"])})
            # Slower than the default beyond the noise: every round of auto above every round
            # of the default.
            verdict = ("slower than the default beyond the rounds' noise"
                       if min(autos) > max(defaults) else "not slower than the default beyond "
                       "the rounds' noise" if auto > fixed[BASE[0]] else "")
            print(f"  auto chose {', '.join(picks)}: {auto / 1e6:.2f} ms "
                  f"(rounds {min(autos) / 1e6:.1f}-{max(autos) / 1e6:.1f}), "
                  f"{auto / fixed[best]:.2f}x the best fixed cap ({best}, "
                  f"{fixed[best] / 1e6:.2f} ms), {auto / fixed[BASE[0]]:.2f}x {BASE[0]} (rounds "
                  f"{min(defaults) / 1e6:.1f}-{max(defaults) / 1e6:.1f}){', ' if verdict else ''}"
                  f"{verdict} (goal: within noise of the best, never above the default)")
    for (engine, world, shape), result in fsdp_tables.items():
        base_errors.setdefault(engine, []).append(abs(result["base_error"]))
        print(f"\n{ENGINE_NAMES[engine]}, {shape}, batch {FSDP_BATCH}, "
              f"{world} ranks: predicted from the {FSDP_BASE[0]} run's trace (its replay's own "
              f"error {result['base_error'] * 100:+.1f}%), medians of {args.rounds} rounds")
        print_rows(result["rows"], 34, errors.setdefault(engine, []))
    for engine, errs in errors.items():
        name = ENGINE_NAMES[engine]
        if errs:
            bases = base_errors.get(engine, [0])
            print(f"\n{name}: {summary(errs)}; the unchanged replay's |error| "
                  f"median {statistics.median(bases) * 100:.1f}% (goal <= 3%), worst "
                  f"{max(bases) * 100:.1f}%")


if __name__ == "__main__":
    sys.exit(main())
