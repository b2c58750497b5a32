"""torch's own DistributedDataParallel and FSDP2, bucket by bucket and unit by unit, while
tracing records.

`import ringx` wraps `DistributedDataParallel.forward` (and times the Reducer's
`_rebuild_buckets`): with tracing off the wrapper costs one check per forward. With tracing
on, the first forward of each DDP module reads the Reducer's bucket layout
(`_get_zeros_like_grad_buckets`: each bucket's parameters, in launch order) and hands it to
a C++ watch (ddp/watch/ddp_watch.h); the forward's begin and end arm the watch, and
torch's RecordFunction callbacks (observe/torch_callbacks.cc) see the backward: when
each parameter's gradient was ready, each bucket's collective from issue to finish (over
ringx, when the wire ran it), backward's compute end and its end. The trace then has what a
ringx.ddp trace has: "ddp" and "ddp:bucket<k>" events, bucket plans and rebuilds.

FSDP2 (`fully_shard`) names every phase of every unit in a record_function, which the same
callbacks turn into ringx.fsdp's per-unit events (fsdp/watch/fsdp_watch.h); what they
cannot see is each unit's sizes, which the root's pre-forward hands them here once its lazy
init has built the units (FSDPState._root_pre_forward, wrapped).

Nothing in the training script changes; the backend may be ringx, gloo or NCCL
(docs/tracing.md).
"""

import functools
import sys
import weakref

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from . import _C

_trace = _C.trace
_watches = weakref.WeakKeyDictionary()  # DDP module -> its watch
_rebuilds = {}  # id(reducer) -> (begin_ns, end_ns) of its last rebuild
_original_forward = DistributedDataParallel.forward
_original_rebuild = dist.Reducer._rebuild_buckets


def _reducer_parameters(ddp):
    """The parameters in the Reducer's order (DistributedDataParallel._build_params_for_reducer):
    every module's own parameters in named_modules order, once each, that require grad and
    are not ignored."""
    seen, params = set(), []
    for module_name, module in ddp.module.named_modules():
        for name, p in module.named_parameters(recurse=False):
            fqn = f"{module_name}.{name}" if module_name else name
            if p.requires_grad and fqn not in ddp.parameters_to_ignore and p not in seen:
                seen.add(p)
                params.append(p)
    return params


def _set_layout(ddp, watch):
    params = _reducer_parameters(ddp)
    index = {id(p): i for i, p in enumerate(params)}
    buckets, sizes = [], []
    for bucket in ddp.reducer._get_zeros_like_grad_buckets():
        buckets.append([index[id(p)] for p in bucket.parameters() if id(p) in index])
        buffer = bucket.buffer()
        sizes.append(buffer.numel() * buffer.element_size())
    first = getattr(ddp, "_bucket_config", None)
    first = first.first_bucket_bytes_cap if first is not None else dist._DEFAULT_FIRST_BUCKET_BYTES
    watch.set_layout(params, buckets, sizes, int(ddp.bucket_bytes_cap), int(first),
                     bool(ddp.gradient_as_bucket_view), dist.get_world_size(ddp.process_group),
                     bool(ddp.find_unused_parameters))


def _watch(ddp):
    _C._register_engines(_C)
    watch = _C.ddp.TorchWatch()
    _set_layout(ddp, watch)
    _watches[ddp] = watch
    return watch


@functools.wraps(_original_forward)
def _forward(self, *inputs, **kwargs):
    if not _trace.enabled() or getattr(self, "_use_python_reducer", False):
        return _original_forward(self, *inputs, **kwargs)
    _trace.watch_torch_engines()
    watch = _watches.get(self)
    if watch is None:
        watch = _watch(self)
    rebuilt = self._has_rebuilt_buckets
    watch.forward_begin()
    output = _original_forward(self, *inputs, **kwargs)
    if self._has_rebuilt_buckets and not rebuilt:
        # The Reducer rebuilt its buckets in this forward (in gradient-ready order): the new
        # layout, and how long the rebuild took.
        begin, end = _rebuilds.pop(id(self.reducer), (0, 0))
        if end:
            watch.record_rebuild(begin, end)
        _set_layout(self, watch)
    watch.forward_end(torch.is_grad_enabled() and self.require_backward_grad_sync)
    return output


def _rebuild_buckets(reducer):
    if not _trace.enabled():
        return _original_rebuild(reducer)
    begin = _trace.now()
    rebuilt = _original_rebuild(reducer)
    if rebuilt:
        _rebuilds[id(reducer)] = (begin, _trace.now())
    return rebuilt


# ---- FSDP2 ----------------------------------------------------------------------------------

def _bytes(numel, dtype):
    return int(numel) * torch.empty((), dtype=dtype).element_size()


def _fsdp_units(root_state):
    """Each FSDPParamGroup of the root's tree: (module path, sharded bytes, unsharded bytes in
    the all-gather's dtype, unsharded gradient bytes in the reduce dtype, sharded gradient
    bytes, whether it reshards after forward, what it keeps after forward when it reshards to
    a smaller group: reshard_after_forward=N), and the schedule."""
    units, shard_size, forward_prefetch, hybrid, blocking = [], 1, False, False, False
    for state in root_state._state_ctx.all_states:
        forward_prefetch = forward_prefetch or bool(state._states_to_forward_prefetch)
        group = state._fsdp_param_group
        if group is None:
            continue
        sharded = unsharded = grads = sharded_grads = held = 0
        post = group.post_forward_mesh_info
        # reshard_after_forward=N: FSDP2 keeps a 1/N slice of each all-gather output (its
        # padded sharded size times the shard group, over N) until the next gather.
        smaller = post is not None and post != group.mesh_info
        shards = getattr(group.mesh_info, "shard_mesh_size", 1)
        for p in group.fsdp_params:
            numel = p._orig_size.numel()
            param_dtype = p.param_dtype or p.orig_dtype
            reduce_dtype = p.reduce_dtype or param_dtype
            local = p._sharded_param_data.numel()
            sharded += _bytes(local, p.orig_dtype)
            unsharded += _bytes(numel, param_dtype)
            grads += _bytes(numel, reduce_dtype)
            sharded_grads += _bytes(local, p.orig_dtype)
            if smaller:
                held += _bytes(local * shards // post.shard_mesh_size, param_dtype)
        reshards = post is not None
        units.append((group._module_fqn, sharded, unsharded, grads, sharded_grads, reshards, held))
        shard_size = getattr(group.mesh_info, "shard_mesh_size", 1)
        hybrid = hybrid or hasattr(group.mesh_info, "replicate_mesh_size")
        # On CPU tensors FSDP2's collectives run on no stream of their own: each blocks the
        # thread that issued it (prefetching moves a gather earlier, it cannot hide it).
        blocking = blocking or torch.device(group.device).type == "cpu"
    # Whether the root reshards after forward depends on how it was asked (its backward needs it
    # at once): the other units say which of PyTorch's strategies this is.
    if hybrid:
        strategy = "HYBRID_SHARD"
    elif any(u[5] for u in units if u[0]):
        strategy = "FULL_SHARD"
    else:
        strategy = "SHARD_GRAD_OP"
    return units, strategy, shard_size, forward_prefetch, blocking


def _root_pre_forward(self, *args, **kwargs):
    if _trace.enabled():
        _trace.watch_torch_engines()  # before the root's scopes begin
    result = _original_root_pre_forward(self, *args, **kwargs)
    if _trace.enabled() and self._is_root:
        _C._register_engines(_C)
        if not _C.fsdp.torch_units_known():  # each recording's watch learns them once
            units, strategy, shard_size, forward_prefetch, blocking = _fsdp_units(self)
            _C.fsdp.watch_torch_units(units, strategy, "BACKWARD_PRE", forward_prefetch,
                                      shard_size, blocking)
    return result


# FSDP2's state class, wrapped when FSDP2 is imported rather than at `import ringx`: importing
# it brings in torch.export and sympy, 0.7 s of CPU that every rank paid at each start (of
# 2.1 s for torch, torch.distributed and ringx together, torch 2.13; bench/import_cost.py)
# whether or not it used FSDP2. A job that uses FSDP2 imports it before it can wrap a module,
# so the wrap is in place before the first root pre-forward.
_FSDP2_STATE = "torch.distributed.fsdp._fully_shard._fsdp_state"
_original_root_pre_forward = None


def _wrap_fsdp2(module):
    global _original_root_pre_forward
    state = getattr(module, "FSDPState", None)
    if state is None or state._root_pre_forward is _root_pre_forward:
        return
    _original_root_pre_forward = state._root_pre_forward
    state._root_pre_forward = _root_pre_forward


class _WrapFsdp2OnImport:
    """A sys.meta_path finder that answers only for FSDP2's state module: it takes the spec
    the other finders give and wraps the loader's exec_module (on that spec's own loader
    object) so the module is wrapped right after it runs; then it leaves sys.meta_path."""

    def find_spec(self, name, path, target=None):
        if name != _FSDP2_STATE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        self.remove()
        loader, run = spec.loader, spec.loader.exec_module

        def exec_module(module):
            run(module)
            _wrap_fsdp2(module)

        loader.exec_module = exec_module
        return spec

    def remove(self):
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def install():
    """Wraps torch's DDP forward now and FSDP2's root pre-forward when FSDP2 is imported (now,
    if it already is); once, `import ringx` calls it."""
    if DistributedDataParallel.forward is not _forward:
        DistributedDataParallel.forward = _forward
        dist.Reducer._rebuild_buckets = _rebuild_buckets
    if _FSDP2_STATE in sys.modules:
        _wrap_fsdp2(sys.modules[_FSDP2_STATE])
    elif not any(isinstance(finder, _WrapFsdp2OnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _WrapFsdp2OnImport())
