"""ringx.ddp: data-parallel training with a C++ engine that times every bucket.

    import ringx
    from ringx.ddp import DistributedDataParallel as DDP
    model = DDP(model)                 # was: torch.nn.parallel.DistributedDataParallel(model)

The constructor takes the arguments of torch.nn.parallel.DistributedDataParallel that
apply to CPU training (bucket_cap_mb, find_unused_parameters, gradient_as_bucket_view,
broadcast_buffers, static_graph, process_group) and behaves the same way: it checks that
every rank built the same model, copies rank 0's parameters and buffers to every rank,
and from then on every backward averages the gradients across ranks, bucket by bucket,
while backward is still running. `no_sync()` accumulates gradients locally;
`bucket_cap_mb="auto"` times the first steps after the bucket rebuild, replays them with
other caps (ringx-trace whatif's model, the host's cores shared among every rank's threads as
that schedule would share them) and rebuilds once with the fastest (`auto_choice()` says
which and why). `register_comm_hook(state, hook)` takes PyTorch's hooks (same GradBucket contract) and
ringx's built-in `fp16_compress_hook` / `bf16_compress_hook`, which run in C++.

It works over any process group (gloo included) and is fastest over ringx. With tracing
on (ringx.trace, RINGX_TRACE_DIR) every bucket of every iteration becomes an event:
first gradient, ready, launch, wire start/end, copy-back, and how much of its
communication was exposed after backward's compute ended. `last_iteration()` returns the
same figures to Python.
"""

import contextlib

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as _torch_hooks

from . import _C

_C._register_engines(_C)  # the engines' classes (ringx._C.ddp, ringx._C.fsdp)

__all__ = ["DistributedDataParallel", "fp16_compress_hook", "bf16_compress_hook"]


def fp16_compress_hook(state, bucket):
    """Averages each bucket in float16 (half the bytes on the wire). Registered on a
    ringx.ddp model it runs in C++; elsewhere it is PyTorch's fp16 hook."""
    return _torch_hooks.fp16_compress_hook(state, bucket)


def bf16_compress_hook(state, bucket):
    """Averages each bucket in bfloat16. Registered on a ringx.ddp model it runs in C++."""
    return _torch_hooks.bf16_compress_hook(state, bucket)


fp16_compress_hook._ringx_builtin = "fp16"
bf16_compress_hook._ringx_builtin = "bf16"


def _tensors(output):
    """Every tensor in a forward's output (tensors, lists, tuples, dicts, nested)."""
    found = []
    stack = [output]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            found.append(item)
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return found


class DistributedDataParallel(nn.Module):
    """Drop-in for torch.nn.parallel.DistributedDataParallel on CPU (see the module doc)."""

    def __init__(self, module, device_ids=None, output_device=None, dim=0,
                 broadcast_buffers=True, process_group=None, bucket_cap_mb=25,
                 find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False):
        super().__init__()
        if device_ids not in (None, []) or output_device is not None:
            raise ValueError("ringx.ddp trains CPU modules: leave device_ids and output_device "
                             f"unset (got device_ids={device_ids}, output_device={output_device})")
        if not isinstance(module, nn.Module):
            raise TypeError(f"ringx.ddp wraps an nn.Module, got {type(module).__name__}")
        auto = bucket_cap_mb == "auto"
        if auto:
            if find_unused_parameters and not static_graph:
                raise ValueError('bucket_cap_mb="auto" rebuilds the buckets after timing a few '
                                 "steps, which find_unused_parameters=True turns off; pass "
                                 "static_graph=True as well, or a fixed bucket_cap_mb")
            bucket_cap_mb = 25  # torch's default, until the choice
        elif (isinstance(bucket_cap_mb, str) or bucket_cap_mb is None
              or bucket_cap_mb <= 0):
            raise ValueError(f'bucket_cap_mb must be positive or "auto", got {bucket_cap_mb!r}')
        if not any(p.requires_grad for p in module.parameters()):
            raise RuntimeError("ringx.ddp: the module has no parameters that require "
                               "gradients; there is nothing to synchronise")
        if process_group is None:
            if not dist.is_initialized():
                raise RuntimeError("ringx.ddp needs torch.distributed: call "
                                   "dist.init_process_group(...) first")
            process_group = dist.distributed_c10d._get_default_group()
        self.module = module
        self.process_group = process_group
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self._engine = _C.ddp.Engine(
            list(module.named_parameters()), list(module.named_buffers()), process_group,
            float(bucket_cap_mb), bool(find_unused_parameters), bool(gradient_as_bucket_view),
            bool(broadcast_buffers), bool(static_graph), auto)

    # -- the training loop's view ------------------------------------------------------

    def forward(self, *inputs, **kwargs):
        self._engine.before_forward()
        output = self.module(*inputs, **kwargs)
        self._engine.after_forward(_tensors(output))
        return output

    @contextlib.contextmanager
    def no_sync(self):
        """Backward inside this block only accumulates gradients locally; the next
        backward outside it averages the accumulated sum across ranks."""
        previous = self._engine.require_backward_grad_sync
        self._engine.require_backward_grad_sync = False
        try:
            yield
        finally:
            self._engine.require_backward_grad_sync = previous

    @property
    def require_backward_grad_sync(self):
        return self._engine.require_backward_grad_sync

    @require_backward_grad_sync.setter
    def require_backward_grad_sync(self, value):
        self._engine.require_backward_grad_sync = bool(value)

    def register_comm_hook(self, state, hook):
        """hook(state, bucket: torch.distributed.GradBucket) -> torch.futures.Future[Tensor],
        as in PyTorch. Must be called before the first forward. ringx.ddp's own
        fp16_compress_hook / bf16_compress_hook run in C++ (state is ignored: they use
        this model's process group)."""
        if not callable(hook):
            raise TypeError("register_comm_hook: hook must be callable")
        builtin = getattr(hook, "_ringx_builtin", None)
        if builtin is not None:
            self._engine.register_builtin_comm_hook(builtin)
        else:
            self._engine.register_comm_hook(state, hook)

    # -- what the engine knows -----------------------------------------------------------

    def bucket_assignment(self):
        """Parameter names of each bucket, in launch order."""
        names = self._engine.parameter_names()
        return [[names[i] for i in bucket] for bucket in self._engine.bucket_assignment()]

    def auto_choice(self):
        """With bucket_cap_mb="auto": the cap chosen and why ("bucket_cap_mb=4 (3 buckets):
        11.20 ms a step predicted, against 12.00 ms at 25 ..."), once chosen: the five synchronised
        steps after the bucket rebuild (iterations 1-5) are timed, and the choice is made as
        iteration 6 starts. None before, or without "auto"."""
        return self._engine.auto_choice() or None

    def bucket_bytes(self):
        """Bytes the engine holds in gradient buckets."""
        return self._engine.bucket_bytes()

    @property
    def buckets_rebuilt(self):
        """True once the buckets were rebuilt in the order gradients became ready."""
        return self._engine.buckets_rebuilt

    def globally_unused_parameters(self):
        """Names of the parameters no rank used in the last iteration
        (find_unused_parameters / static_graph)."""
        return self._engine.globally_unused_parameters()

    def last_iteration(self):
        """Timings of the last synchronised iteration: a dict of steady-clock ns
        (forward_begin_ns, backward_end_ns, exposed_ns, ...) with one dict per bucket."""
        return self._engine.last_iteration()
