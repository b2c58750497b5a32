#!/usr/bin/env python3
"""ringx.fsdp: peak parameter+gradient memory against the FSDP algorithm's account, and
step time against DDP, same processes, interleaved.

    PYTHONPATH=build/python .venv/bin/python bench/fsdp.py [--world-size 2] [--quick] [--docs]

The model is a transformer-like stack without attention: an input Linear(d, d), 8 blocks
(LayerNorm(d), Linear(d, 4d), GELU, Linear(4d, d), residual; d = 256, 526,080 parameters
each) and a Linear(d, d) head. FSDP wraps it with auto_wrap_policy={Block}: each block is
a unit, the input layer and the head form the root unit. Every rank process holds a gloo
group and a ringx group over the same ranks and every model below; all models start from
the same seed on every rank, every rank trains on its own batch (SGD,
zero_grad(set_to_none=True)). Rounds alternate the models so that all see the same
machine state; each figure is the median over rounds of the mean step time (forward,
backward, SGD step) of the round's steps.

1. Memory (FSDP on the ringx world group). model.memory_stats()["peak_bytes"] is the
   peak, at the engine's own events, of what it holds: parameter shards, gathered
   (unsharded) parameters, gradient buffers (unsharded flat gradients, reduce-scatter
   outputs, sharded gradients). It is reset after two warm-up steps and read after
   the measured steps. The formula is what the FSDP algorithm itself must hold at its peak,
   derived from this engine's schedule (not fitted). In elements (x 4 bytes, fp32), with
   S the world size, N the number of blocks, U one block's numel, R the root unit's numel
   (each rounded up to a multiple of S: the engine pads units to equal shards),
   Psi = R + N*U and Psi/S the parameter shards (the sum of the units' shards):

   FULL_SHARD, BACKWARD_PRE (with or without limit_all_gathers, with or without
   forward_prefetch) peaks when block 1's backward starts:
       Psi/S              parameter shards (always held)
     + R                  root parameters: the root is not resharded after forward, so
                          it stays gathered until backward ends
     + R                  root unsharded gradient: allocated when backward starts (the
                          head is the first module backward reaches) and needed until it
                          ends (the input layer is the last)
     + 2U                 block 1's gathered parameters + block 0's, prefetched
     + U                  block 1's unsharded gradient
     + U                  block 2's unsharded gradient: the input of its reduce-scatter,
                          launched when block 2's backward ended, to overlap block 1's;
                          the engine frees it when it retires the reduction, which it
                          does only when a unit's backward ends (or backward does), so
                          it is held when block 1 starts even if the wire is done
     + (N-2) U/S          sharded gradients of blocks 2..N-1 (block 2's is its
                          reduce-scatter's output); zero_grad(set_to_none=True) frees
                          them before each step, so only the ones already reduced exist
   FULL_SHARD, BACKWARD_POST or no backward prefetch: block k's parameters are gathered
   only after block k+1's are freed, so one block is gathered at a time, and the peak
   moves to block 0's backward: Psi/S + 2R + U + U + U + (N-1) U/S.
   SHARD_GRAD_OP: every unit stays gathered from forward to its backward; the peak is
   when block N-2's backward starts (block N-1 already freed):
       Psi/S + (Psi - U) gathered + R root gradient + 2U (block N-2's gradient, block
       N-1's in its reduce-scatter) + U/S (that reduce-scatter's output)
     = Psi/S + Psi + R + U + U/S.
   The paper's coarse figures, 4(2 Psi/S + R + 3U) for FULL_SHARD with prefetch and
   4(2 Psi/S + Psi + U) for SHARD_GRAD_OP, count every sharded gradient (as if they were
   kept between steps) and neither the root's gradient nor the pending reduce-scatter;
   they are printed under the table for comparison.
   The formula counts one reduce-scatter pending, the one overlapping the next block's
   backward. With limit_all_gathers (the default) that is what the engine holds: when a
   block's backward ends it retires every reduction but the block's own (waiting for it if
   need be), so the peak is the formula whatever the wire's speed. Without the limiter it
   retires a reduction when it finds it done, at the next block's start or end, and can hold
   more when the wire is slow. The column "RS pending" is the most
   blocks whose unsharded gradient was still held (reduction launched, not yet retired)
   when another block's backward started, seen by a hook on each block's output that
   runs before the engine's; "w/ observed" is the formula's account evaluated at every
   block's backward start with the counts each measured step actually had (for block k:
   Psi/S + 2R + gathered x U + U + pending x U + (N-1-k) U/S, gathered = 2 with
   BACKWARD_PRE and k > 0, else 1; k + 1 for SHARD_GRAD_OP), maximum over the steps.
   Where it equals "measured", the whole gap to the formula is those extra reductions.

2. Speed: the same model with torch DDP on gloo (the anchor), ringx.ddp on ringx, and
   ringx.fsdp FULL_SHARD (defaults) and SHARD_GRAD_OP on ringx (the same model objects
   as in the memory table). Bytes on the wire are measured, per rank and step over all
   timed steps: the kernel's counters of the process's TCP sockets (gloo's, and ringx's
   TCP connections) plus ringx's own counters of its shared-memory connections
   (ringx.wire.bytes_sent; tests/python/test_traffic.py checks that ringx's counters and
   the kernel's agree to the byte over TCP). Beside them, what bandwidth-optimal ring
   algorithms would send: DDP allreduces the gradients, 2(S-1)/S x 4 Psi; FULL_SHARD
   all-gathers in forward, again in backward, and reduce-scatters: 3(S-1)/S x 4 Psi, the
   paper's 1.5x of DDP (exactly (S-1)/S x 4 (3 Psi - R) here: the root is gathered once);
   SHARD_GRAD_OP gathers once and reduce-scatters: 2(S-1)/S x 4 Psi, 1.0x.

3. torch's own FSDP2 beside ringx.fsdp, measured from the outside, in separate rank processes:
   torch DDP on gloo, ringx.ddp on ringx, FSDP2 (fully_shard on every Block and the root, on a
   device mesh over the group) on gloo and on ringx, and ringx.fsdp FULL_SHARD on ringx, the
   same model from the same seed. Step time and bytes sent as above (interleaved rounds,
   medians; bytes over all timed steps). One extra step per engine runs under
   torch.profiler(profile_memory=True, record_shapes=True), the same outside tool for every
   engine, for two figures:
   - the collectives it recorded: every c10d operator (c10d::allreduce_,
     c10d::_allgather_base_, ...; all backends and engines go through them) and the payload
     its recorded input shapes give (the gathered output, the reduced input; elements x the
     recorded dtype's size, fp32 for tensor lists, whose dtype the profiler does not record).
     Sent/payload shows what each backend's algorithms make of a payload: about (S-1)/S for
     a ring all-gather or reduce-scatter, 2(S-1)/S for an allreduce.
   - memory: the profiler runs from before the engine is built, through two warm-up steps,
     to the end of the measured step, so the running sum of the allocations and frees it saw
     is what the engine holds: "held" when the measured step starts, "peak" at its highest
     point during the step (parameters, gradients, buffers, activations, temporaries), and
     "rise", the difference. ringx.fsdp's own peak counter (parameters and gradients only)
     is printed beside it. The profiler's account can miss frees (FSDP2 on gloo's "held"
     came out a few MiB above FSDP2 on ringx's in some runs, equal in others); "rise" does
     not carry what it missed before the step.
Compare ratios within one run; absolute times on a shared 2-core machine drift.
"""

import argparse
import datetime
import os
import socket
import json
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn

import docs_table
from bench_ranks import run_ranks, timed_rounds

DIM = 256
BLOCKS = 8
BATCH = 64  # rows per rank
MiB = 1 << 20


class Block(nn.Module):
    """LayerNorm, MLP (d -> 4d -> d, GELU), residual: 8 d^2 + 7 d parameters."""

    def __init__(self, dim=DIM):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, dim=DIM, blocks=BLOCKS):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.blocks = nn.Sequential(*[Block(dim) for _ in range(blocks)])
        self.head = nn.Linear(dim, dim)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x)))


# (label, FSDP keyword arguments); all FSDP runs use the ringx world group.
MEMORY_CONFIGS = [
    ("FULL_SHARD, BACKWARD_PRE, limit (default)", {}),
    ("FULL_SHARD, BACKWARD_PRE, no limit", dict(limit_all_gathers=False)),
    ("FULL_SHARD, BACKWARD_POST", dict(backward_prefetch="BACKWARD_POST")),
    ("FULL_SHARD, no backward prefetch", dict(backward_prefetch=None)),
    ("FULL_SHARD, forward_prefetch", dict(forward_prefetch=True)),
    ("SHARD_GRAD_OP", dict(sharding_strategy="SHARD_GRAD_OP")),
    ("FULL_SHARD, gathers on the reduce lane", dict(gather_lane=False)),
]
# (label, engine, backend, memory config index for FSDP)
SPEED_CONFIGS = [
    ("torch DDP", "torch.ddp", "gloo", None),
    ("ringx.ddp", "ringx.ddp", "ringx", None),
    ("ringx.fsdp FULL_SHARD", "ringx.fsdp", "ringx", 0),
    ("ringx.fsdp SHARD_GRAD_OP", "ringx.fsdp", "ringx", 5),
    ("ringx.fsdp FULL_SHARD, one lane", "ringx.fsdp", "ringx", 6),
]


def training_step(rank):
    """step(model, opt): one SGD step on this rank's fixed batch (zero_grad(set_to_none=True)),
    the step every engine of sections 1 to 3 is timed on."""
    generator = torch.Generator().manual_seed(rank)
    x = torch.randn(BATCH, DIM, generator=generator)
    y = torch.randn(BATCH, DIM, generator=generator)

    def step(model, opt):
        opt.zero_grad(set_to_none=True)
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    return step


def block_params(block):
    """The original parameters of a Block (FSDP keeps them as attributes)."""
    return [getattr(m, a) for m in (block.norm, block.up, block.down) for a in ("weight", "bias")]


def watch_pending_reductions(fsdp, record):
    """When block k's backward starts (a hook on its output, which runs before the
    engine's own), record in record[-1][k] how many other blocks still hold their
    unsharded gradient: the reductions launched but not yet retired, whose input it is."""
    blocks = [wrapper.module for wrapper in fsdp.module.blocks]

    def holds_gradient(block):
        return any(p.grad is not None and p.grad.storage().nbytes() > 0
                   for p in block_params(block))

    def hook(k):
        def on_grad(_):
            if record:
                record[-1][k] = sum(holds_gradient(b) for i, b in enumerate(blocks) if i != k)

        def forward_hook(module, inputs, output):
            if output.requires_grad:
                output.register_hook(on_grad)
        return forward_hook

    for k, block in enumerate(blocks):
        block.register_forward_hook(hook(k))


def worker(rank, world, init, rounds, steps, results):
    import ringx  # noqa: F401  registers the backend
    from ringx.ddp import DistributedDataParallel as RingxDDP
    from ringx.fsdp import FullyShardedDataParallel as FSDP

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    groups = {"gloo": dist.group.WORLD, "ringx": dist.new_group(backend="ringx")}

    runs = {}  # key -> (model, optimizer)
    pending = {}
    for index, (label, kwargs) in enumerate(MEMORY_CONFIGS):
        torch.manual_seed(0)
        model = FSDP(Net(), process_group=groups["ringx"], auto_wrap_policy={Block}, **kwargs)
        pending[("memory", index)] = []
        watch_pending_reductions(model, pending[("memory", index)])
        runs[("memory", index)] = (model, torch.optim.SGD(model.parameters(), lr=1e-3))
    for label, engine, backend, index in SPEED_CONFIGS:
        if engine == "ringx.fsdp":
            continue  # the memory table's model
        torch.manual_seed(0)
        wrap = RingxDDP if engine == "ringx.ddp" else nn.parallel.DistributedDataParallel
        model = wrap(Net(), process_group=groups[backend])
        runs[("speed", label)] = (model, torch.optim.SGD(model.parameters(), lr=1e-3))

    step = training_step(rank)

    for key, (model, opt) in runs.items():  # warm up (ringx.ddp rebuilds its buckets)
        for _ in range(2):
            step(model, opt)
        if key[0] == "memory":
            model.reset_peak_memory()
    def new_step_record(key):
        if key in pending:
            pending[key].append({})  # this step's {block: reductions pending}

    timed = timed_rounds(runs, step, rounds, steps, groups["gloo"], [groups["ringx"]],
                         before_step=new_step_record)

    out = {"memory": [], "speed": {}}
    for index in range(len(MEMORY_CONFIGS)):
        key = ("memory", index)
        model = runs[key][0]
        out["memory"].append(dict(
            stats=dict(model.memory_stats()), units=model.units(),
            shard_numel=sum(p.numel() for p in model.parameters()),
            pending=pending[key],
            seconds=timed[key]["seconds"]))
    for label, engine, backend, index in SPEED_CONFIGS:
        key = ("memory", index) if engine == "ringx.fsdp" else ("speed", label)
        out["speed"][label] = timed[key]
    out["params"] = sum(p.numel() for p in Net().parameters())
    results[rank] = out
    dist.destroy_process_group()


# ---- the accounts ----------------------------------------------------------------------


def unit_sizes(units, world):
    """(R, U, N, shards): padded root and block numels, number of blocks, sum of shards."""
    pad = lambda n: -(-n // world) * world  # noqa: E731  the engine pads units to S
    root = [pad(n) for name, _, _, n in units if name == ""]
    blocks = [pad(n) for name, _, _, n in units if name != ""]
    assert len(root) == 1 and len(set(blocks)) == 1, "the formulas assume equal blocks"
    return root[0], blocks[0], len(blocks), sum(pad(n) // world for _, _, _, n in units)


def held_at_block_start(kwargs, sizes, world, k, pending):
    """Elements the engine holds when block k's backward starts (after its gather, its
    prefetch and its gradient buffer), with `pending` earlier blocks' reduce-scatters
    not yet retired. The schedule is the module doc's."""
    R, U, N, shards = sizes
    if kwargs.get("sharding_strategy") == "SHARD_GRAD_OP":
        gathered = k + 1  # blocks 0..k; every later block was freed after its backward
    else:  # FULL_SHARD: block k, and block k-1 when BACKWARD_PRE prefetched it
        prefetch = kwargs.get("backward_prefetch", "BACKWARD_PRE") == "BACKWARD_PRE"
        gathered = 2 if prefetch and k > 0 else 1
    return (shards                           # parameter shards
            + R + R                          # root parameters (gathered) and its gradient
            + gathered * U                   # gathered blocks
            + U + pending * U                # block k's gradient, those in reduce-scatters
            + (N - 1 - k) * (U // world))    # sharded gradients of blocks k+1..N-1


def memory_formula(kwargs, units, world):
    """(peak bytes the algorithm must hold: one reduce-scatter pending, the closed forms
    of the module doc; the paper's coarse figure)."""
    sizes = R, U, N, shards = unit_sizes(units, world)
    psi = R + N * U
    peak = max(held_at_block_start(kwargs, sizes, world, k, min(1, N - 1 - k))
               for k in range(N))
    if kwargs.get("sharding_strategy") == "SHARD_GRAD_OP":
        closed = shards + psi + R + U + U // world
        paper = 2 * psi // world + psi + U
    else:
        prefetch = kwargs.get("backward_prefetch", "BACKWARD_PRE") == "BACKWARD_PRE"
        closed = (shards + 2 * R + 4 * U + (N - 2) * (U // world) if prefetch
                  else shards + 2 * R + 3 * U + (N - 1) * (U // world))
        paper = 2 * psi // world + R + (3 if prefetch else 2) * U
    assert closed == peak, (closed, peak)
    return 4 * peak, 4 * paper


def schedule_peak(kwargs, units, world, steps):
    """The same account with the reduce-scatters each step actually had pending."""
    sizes = unit_sizes(units, world)
    return 4 * max(held_at_block_start(kwargs, sizes, world, k, m)
                   for step in steps for k, m in step.items())


def report(results, args):
    world = args.world_size
    print(f"ringx.fsdp, world size {world} on {socket.gethostname()} ({os.cpu_count()} cores), "
          f"median of {args.rounds} interleaved rounds x {args.steps} steps; rank 0's view")
    memory = results["memory"]
    R, U, N, shards = unit_sizes(memory[0]["units"], world)
    psi = R + N * U
    print(f"\nmodel: input Linear + {N} blocks (d={DIM}) + head, {results['params'] / 1e6:.2f} M "
          f"parameters ({results['params'] * 4 / MiB:.2f} MiB fp32); units: root R = {R:,}, "
          f"block U = {U:,} (padded to S); batch {BATCH} x {DIM} per rank")

    print("\n1. Peak parameter+gradient memory held by the engine (ringx world group)")
    print(f"  {'configuration':<42} {'measured MiB':>12} {'formula MiB':>11} {'meas/form':>9} "
          f"{'RS pending':>10} {'w/ observed':>11} {'step ms':>8}")
    papers = []
    for (label, kwargs), run in zip(MEMORY_CONFIGS, memory):
        formula, paper = memory_formula(kwargs, run["units"], world)
        observed = schedule_peak(kwargs, run["units"], world, run["pending"])
        most = max(m for step in run["pending"] for m in step.values())
        papers.append(paper)
        peak = run["stats"]["peak_bytes"]
        print(f"  {label:<42} {peak / MiB:12.2f} {formula / MiB:11.2f} {peak / formula:8.2f}x "
              f"{most:10d} {observed / MiB:11.2f} {run['seconds'] * 1e3:8.1f}")
        assert run["stats"]["sharded_bytes"] == 4 * shards == 4 * run["shard_numel"]
    print(f"  formula, x 4 bytes, with Psi/S = {shards:,} (the parameter shards), root R = {R:,}, "
          f"block U = {U:,} ({4 * U / MiB:.2f} MiB), N = {N} blocks, S = {world}; one "
          f"reduce-scatter pending:")
    print("    FULL_SHARD, BACKWARD_PRE   Psi/S + R root params + R root grad + 2U (current + "
          "prefetched block) + U its grad + U (previous block's grad, in its reduce-scatter) "
          "+ (N-2)U/S sharded grads so far")
    print("    FULL_SHARD, POST or none   Psi/S + 2R + U (one block gathered) + 2U grads + "
          "(N-1)U/S")
    print("    SHARD_GRAD_OP              Psi/S + (Psi - U) (all gathered but the last block) + "
          "R + 2U + U/S")
    print(f"  the paper's coarse figures: FULL_SHARD 4(2Psi/S + R + 3U) = {papers[0] / MiB:.2f} "
          f"MiB (no prefetch: 4(2Psi/S + R + 2U) = {papers[3] / MiB:.2f}), SHARD_GRAD_OP "
          f"4(2Psi/S + Psi + U) = {papers[5] / MiB:.2f}; they count all sharded grads, no root "
          f"grad, no reduce-scatter pending")
    print("  RS pending: the most other blocks still holding their unsharded gradient when a "
          "block's backward started, seen by a hook that runs just before the engine's "
          "pre-backward (which first retires reductions that are done): an upper bound; the "
          "formula counts 1, the previous block's reduce-scatter, launched just before. "
          "With limit_all_gathers the engine retires every other reduction when a block's "
          "backward ends, so the peak is the formula's whatever the wire's speed; without it, "
          "reductions are retired when found done and more can be pending on a slow wire")
    print("  w/ observed: the formula's account with the probe's pending counts, maximum over "
          "the measured steps (an upper bound, see RS pending)")
    print("  gathers on the reduce lane: gather_lane=False, all-gathers queue behind "
          "reduce-scatters on the group's one communication thread")

    print(f"\n2. Step time and bytes on the wire, world size {world}")
    speed = results["speed"]
    anchor = speed["torch DDP"]
    ringx_ddp = speed["ringx.ddp"]
    factor = (world - 1) / world
    # What each rank would send with bandwidth-optimal ring algorithms (the paper's account),
    # printed beside the measured bytes.
    ideal = {
        "torch DDP": 2 * factor * 4 * results["params"],
        "ringx.ddp": 2 * factor * 4 * results["params"],
        "ringx.fsdp FULL_SHARD": factor * 4 * (3 * psi - R),
        "ringx.fsdp FULL_SHARD, one lane": factor * 4 * (3 * psi - R),
        "ringx.fsdp SHARD_GRAD_OP": 2 * factor * 4 * psi,
    }
    paper = {"torch DDP": 1.0, "ringx.ddp": 1.0, "ringx.fsdp FULL_SHARD": 1.5,
             "ringx.fsdp FULL_SHARD, one lane": 1.5, "ringx.fsdp SHARD_GRAD_OP": 1.0}
    print(f"  {'engine':<32} {'backend':<7} {'step ms':>8} {'vs torch DDP/gloo':>18} "
          f"{'vs ringx.ddp':>13} {'sent MiB/step':>14} {'vs ideal':>9} {'vs ringx.ddp':>13} "
          f"{'paper':>6}")
    for label, engine, backend, _ in SPEED_CONFIGS:
        r = speed[label]
        print(f"  {label:<32} {backend:<7} {r['seconds'] * 1e3:8.2f} "
              f"{r['seconds'] / anchor['seconds']:17.2f}x "
              f"{r['seconds'] / ringx_ddp['seconds']:12.2f}x {r['sent'] / MiB:14.2f} "
              f"{r['sent'] / ideal[label]:8.3f}x {r['sent'] / ringx_ddp['sent']:12.2f}x "
              f"{paper[label]:5.1f}x")
    fsdp = speed["ringx.fsdp FULL_SHARD"]
    print(f"  FSDP/DDP step time ratio (FULL_SHARD vs ringx.ddp, both on ringx): "
          f"{fsdp['seconds'] / ringx_ddp['seconds']:.2f}x; bytes sent "
          f"{fsdp['sent'] / ringx_ddp['sent']:.2f}x (paper: 1.5x, 2 all-gathers + 1 "
          f"reduce-scatter vs 1 allreduce; {ideal['ringx.fsdp FULL_SHARD'] / ideal['ringx.ddp']:.2f}x "
          f"here, the root is gathered once)")
    sgo = speed["ringx.fsdp SHARD_GRAD_OP"]
    print(f"  SHARD_GRAD_OP/DDP: {sgo['seconds'] / ringx_ddp['seconds']:.2f}x time, "
          f"{sgo['sent'] / ringx_ddp['sent']:.2f}x bytes (paper 1.0x)")
    print("  sent: bytes this rank put on the wire per step, measured (the kernel's TCP "
          "counters, gloo's sockets and ringx's, plus ringx's shared-memory counters; "
          "ringx.wire.bytes_sent), over all timed steps")
    print("  ideal: what bandwidth-optimal ring algorithms send, allreduce 2(S-1)/S x 4Psi, "
          "all-gather and reduce-scatter (S-1)/S x 4 bytes per unit (padded); above 1: "
          "headers, and algorithms that send more")


# ---- 3. torch FSDP2 beside ringx.fsdp ----------------------------------------------------

ENGINES = [  # (label, engine, backend)
    ("torch DDP", "torch.ddp", "gloo"),
    ("ringx.ddp", "ringx.ddp", "ringx"),
    ("torch FSDP2", "torch.fsdp2", "gloo"),
    ("torch FSDP2", "torch.fsdp2", "ringx"),
    ("ringx.fsdp", "ringx.fsdp", "ringx"),
]


# Which recorded input of each c10d operator is its payload: the gathered output (0), the
# reduced input (1), the broadcast or allreduced tensors (0).
PAYLOAD_INPUT = {
    "c10d::allreduce_": 0, "c10d::allreduce_coalesced_": 0, "c10d::broadcast_": 0,
    "c10d::_allgather_base_": 0, "c10d::allgather_": 0,
    "c10d::allgather_into_tensor_coalesced_": 0, "c10d::_reduce_scatter_base_": 1,
    "c10d::reduce_scatter_": 1, "c10d::reduce_scatter_tensor_coalesced_": 1,
}
ELEMENT_BYTES = {"float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2}


def recorded_collectives(trace_events):
    """(count, payload bytes) of the c10d collectives among Chrome trace events exported by
    torch.profiler(record_shapes=True)."""
    def numel(dims):  # a tensor's dims, or a tensor list's list of dims
        if all(isinstance(d, int) for d in dims):
            n = 1
            for d in dims:
                n *= d
            return n
        return sum(numel(d) for d in dims)

    count = payload = 0
    for event in trace_events:
        name = event.get("name", "")
        if not name.startswith("c10d::") or event.get("ph") != "X":
            continue
        if name not in PAYLOAD_INPUT:
            raise SystemExit(f"bench/fsdp.py: a step issued {name}, which recorded_collectives "
                             f"does not know the payload of; add it to PAYLOAD_INPUT")
        index = PAYLOAD_INPUT[name]
        dims = event["args"]["Input Dims"][index]
        dtype = event["args"]["Input type"][index]
        count += 1
        payload += numel(dims) * ELEMENT_BYTES.get(dtype, 4)  # tensor lists: fp32 (see above)
    return count, payload


MEASURED_STEP = "bench/fsdp.py: measured step"


def profile_engine(build, step):
    """Builds an engine, warms it up (two steps) and runs one more step, all under
    torch.profiler(profile_memory=True, record_shapes=True), so that the profiler sees every
    allocation the engine holds. Returns the model, its optimizer and the measured step's
    figures: held (bytes allocated since the build began and not yet freed, when the step
    starts), peak (their highest point during the step), and the step's collectives and
    payload."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True,
                 record_shapes=True) as prof:
        model = build()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        for _ in range(2):  # warm up (buckets rebuilt, lazy state made)
            step(model, opt)
        if hasattr(model, "reset_peak_memory"):
            model.reset_peak_memory()
        with record_function(MEASURED_STEP):
            step(model, opt)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    span = next(e for e in events if e.get("name") == MEASURED_STEP and e.get("ph") == "X")
    start, end = span["ts"], span["ts"] + span["dur"]
    running, held, peak = 0, None, 0
    for event in sorted((e for e in events if e.get("name") == "[memory]"),
                        key=lambda e: e["ts"]):
        if event["ts"] > end:
            break
        if held is None and event["ts"] >= start:
            held = peak = running
        running += event["args"]["Bytes"]
        if held is not None:
            peak = max(peak, running)
    count, payload = recorded_collectives(e for e in events if start <= e.get("ts", -1) <= end)
    return model, opt, dict(held=held, peak=peak, collectives=count, payload=payload)


def worker_fsdp2(rank, world, init, rounds, steps, results):
    import ringx  # noqa: F401  registers the backend
    from ringx.ddp import DistributedDataParallel as RingxDDP
    from ringx.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    groups = {"gloo": dist.group.WORLD, "ringx": dist.new_group(backend="ringx")}

    def build(engine, backend):
        torch.manual_seed(0)
        net = Net()
        group = groups[backend]
        if engine == "torch.ddp":
            return nn.parallel.DistributedDataParallel(net, process_group=group)
        if engine == "ringx.ddp":
            return RingxDDP(net, process_group=group)
        if engine == "ringx.fsdp":
            return FSDP(net, process_group=group, auto_wrap_policy={Block})
        mesh = DeviceMesh.from_group(group, "cpu")
        for block in net.blocks:
            fully_shard(block, mesh=mesh)
        return fully_shard(net, mesh=mesh)

    step = training_step(rank)
    runs, out = {}, {}
    for label, engine, backend in ENGINES:
        model, opt, figures = profile_engine(lambda: build(engine, backend), step)
        runs[(label, backend)] = (model, opt)
        out[(label, backend)] = dict(figures, own_peak=(
            model.memory_stats()["peak_bytes"] if hasattr(model, "memory_stats") else None))
    timed = timed_rounds(runs, step, rounds, steps, groups["gloo"], [groups["ringx"]])
    results[rank] = {f"{label}|{backend}": dict(v, **timed[(label, backend)])
                     for (label, backend), v in out.items()}
    dist.destroy_process_group()


def report_fsdp2(results, args):
    print(f"\n3. torch FSDP2 beside ringx.fsdp, world size {args.world_size} (separate processes; "
          f"peak memory measured on one step, rank 0)")
    anchor = results["torch FSDP2|gloo"]
    print(f"  {'engine':<12} {'backend':<7} {'step ms':>8} {'vs FSDP2/gloo':>14} "
          f"{'collectives':>11} {'payload MiB':>11} {'sent MiB':>9} {'sent/payload':>12} "
          f"{'held MiB':>9} {'peak MiB':>9} {'vs FSDP2/gloo':>14} {'rise MiB':>9} "
          f"{'own counter MiB':>16}")
    for label, _, backend in ENGINES:
        r = results[f"{label}|{backend}"]
        own = f"{r['own_peak'] / MiB:16.2f}" if r["own_peak"] is not None else f"{'-':>16}"
        print(f"  {label:<12} {backend:<7} {r['seconds'] * 1e3:8.2f} "
              f"{r['seconds'] / anchor['seconds']:13.2f}x {r['collectives']:11d} "
              f"{r['payload'] / MiB:11.2f} {r['sent'] / MiB:9.2f} "
              f"{r['sent'] / r['payload']:11.3f}x {r['held'] / MiB:9.2f} {r['peak'] / MiB:9.2f} "
              f"{r['peak'] / anchor['peak']:13.2f}x {(r['peak'] - r['held']) / MiB:9.2f} {own}")
    print("  per step and rank. collectives, payload: the c10d operators torch.profiler recorded "
          "in one step and the bytes their recorded shapes hold; sent: bytes put on the wire, "
          "measured over the timed steps (kernel TCP counters + ringx shared-memory counters)")
    print("  held, peak: what the engine held when the step started and at its highest point "
          "during the step, from the profiler's allocations and frees since the engine was "
          "built (parameters, gradients, buffers, activations, temporaries); rise: peak - held; "
          "own counter: ringx.fsdp's peak of parameters and gradients")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--steps", type=int, default=6, help="steps per round")
    parser.add_argument("--quick", action="store_true", help="fewer rounds (smoke test)")
    parser.add_argument("--docs", action="store_true", help=docs_table.FLAG_HELP)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.steps = 2, 2
    if args.docs:
        docs_table.require("fsdp_memory", "fsdp_speed", "fsdp_fsdp2")
    results = run_ranks(worker, args.world_size, args.rounds, args.steps, name="bench/fsdp.py")
    with docs_table.captured() as sections_1_2:
        report(results, args)
    results = run_ranks(worker_fsdp2, args.world_size, args.rounds, args.steps,
                        name="bench/fsdp.py (FSDP2)")
    with docs_table.captured() as section_3:
        report_fsdp2(results, args)
    if args.docs:  # each section's printed block (the first with the run's and model's lines)
        first, second = sections_1_2.text().split("\n2. Step time", 1)
        docs_table.write("fsdp_memory", docs_table.fenced(first))
        docs_table.write("fsdp_speed", docs_table.fenced("2. Step time" + second))
        docs_table.write("fsdp_fsdp2", docs_table.fenced(section_3.text()))


if __name__ == "__main__":
    main()
