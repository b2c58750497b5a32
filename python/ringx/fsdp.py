"""ringx.fsdp: FullyShardedDataParallel with per-unit timing and memory accounting.

    import ringx
    from ringx.fsdp import FullyShardedDataParallel as FSDP
    model = FSDP(model, auto_wrap_policy={Block})   # each Block is a unit, the rest the root
    opt = torch.optim.SGD(model.parameters(), lr)   # the parameters are this rank's shards
    loss_fn(model(x), y).backward()                 # gradients reduce-scattered into the shards

A module is split into units (by nesting wrappers yourself, or by auto_wrap_policy); each
unit's parameters become one flat parameter of which every rank keeps 1/S. Before a unit
computes, its parameters are all-gathered; afterwards they are freed; in backward they are
gathered again and the gradients reduce-scattered. The engine is C++ (fsdp/ in the repo);
this class only calls it around each wrapped module's forward. See docs/engines.md's
"ringx.fsdp" section for the strategies, prefetching and the trace events.
"""
import collections
import contextlib
import enum
from dataclasses import dataclass
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn as nn

from . import _C
from .ddp import _tensors

_C._register_engines(_C)  # the engines' classes (ringx._C.ddp, ringx._C.fsdp)

__all__ = ["FullyShardedDataParallel", "ShardingStrategy", "BackwardPrefetch", "MixedPrecision"]

_WRAPPED = "_fsdp_wrapped_module"


class ShardingStrategy(enum.Enum):
    FULL_SHARD = "FULL_SHARD"        # reshard after forward: least memory
    SHARD_GRAD_OP = "SHARD_GRAD_OP"  # keep gathered from forward to backward
    NO_SHARD = "NO_SHARD"            # replicate, allreduce gradients (like DDP)
    HYBRID_SHARD = "HYBRID_SHARD"    # shard within groups of S ranks, replicate across them


class BackwardPrefetch(enum.Enum):
    BACKWARD_PRE = "BACKWARD_PRE"    # gather the next unit when this unit's backward starts
    BACKWARD_POST = "BACKWARD_POST"  # ... when this unit's gradients are done


@dataclass
class MixedPrecision:
    """param_dtype: gather and compute in it; reduce_dtype: reduce gradients in it
    (default param_dtype). The shards the optimizer updates stay fp32."""
    param_dtype: Optional[torch.dtype] = None
    reduce_dtype: Optional[torch.dtype] = None


def _enum_name(value, enum_type, argument):
    if value is None or (isinstance(value, str) and value.upper() == "NONE"):
        return "NONE"
    if isinstance(value, enum_type):
        return value.value
    if isinstance(value, enum.Enum):  # torch's own enums carry the same names
        return value.name
    if isinstance(value, str) and value.upper() in enum_type.__members__:
        return value.upper()
    raise ValueError(f"ringx.fsdp: {argument}={value!r} is not one of "
                     f"{', '.join(enum_type.__members__)}")


def _clean(name):
    """A module path without the wrappers' own level."""
    return name.replace(_WRAPPED + ".", "").replace("." + _WRAPPED, "").replace(_WRAPPED, "")


def _wrap_predicate(policy):
    """auto_wrap_policy -> predicate(module, unwrapped parameter count)."""
    if policy is None:
        return None
    if isinstance(policy, (set, frozenset, list, tuple)):
        classes = tuple(policy)
        if not all(isinstance(c, type) and issubclass(c, nn.Module) for c in classes):
            raise TypeError("ringx.fsdp: auto_wrap_policy as a collection must hold "
                            "nn.Module classes")
        return lambda module, numel: isinstance(module, classes)
    if isinstance(policy, int) and not isinstance(policy, bool):
        if policy < 1:
            raise ValueError("ringx.fsdp: auto_wrap_policy as a number is the minimum "
                             f"parameter count of a unit and must be positive, got {policy}")
        return lambda module, numel: numel >= policy
    if callable(policy):
        return lambda module, numel: bool(policy(module))
    raise TypeError("ringx.fsdp: auto_wrap_policy must be a set of module classes, a minimum "
                    f"parameter count, or a callable(module) -> bool; got {type(policy).__name__}")


def _unit_members(module):
    """The (owner module, attribute, parameter, name) of every parameter in `module`'s
    subtree that no nested wrapper manages, first occurrence only; and the modules that
    own them."""
    members, owners, seen = [], [], set()

    def visit(mod, prefix):
        if isinstance(mod, FullyShardedDataParallel):
            return
        owns = False
        for attr, p in mod._parameters.items():
            if p is None:
                continue
            owns = True
            if id(p) in seen:
                continue
            seen.add(id(p))
            members.append((mod, attr, p, prefix + attr))
        if owns:
            owners.append((prefix.rstrip("."), mod))
        for child_name, child in mod._modules.items():
            if child is not None:
                visit(child, prefix + child_name + ".")

    visit(module, "")
    return members, owners


def _unwrapped_numel(module):
    members, _ = _unit_members(module)
    return sum(p.numel() for _, _, p, _ in members)


_hybrid_groups_cache = {}
_gather_lanes = {}


def _gather_lane(process_group):
    """A second group over every rank of the default group, for gathers (so that they
    never queue behind a reduce-scatter on ringx's one communication thread per group).
    new_group is collective over the default group: every rank makes it, once."""
    key = id(process_group)
    if key not in _gather_lanes:
        _gather_lanes[key] = dist.new_group(list(range(process_group.size())))
    return _gather_lanes[key]


def _hybrid_groups(process_group, shard_group_size):
    """(shard group, replicate group) of this rank: shard groups are runs of
    shard_group_size consecutive ranks, replicate groups the ranks at the same place in
    every run. Every rank creates every group, in the same order (new_group is collective)."""
    size = process_group.size()
    if shard_group_size is None:
        import os
        shard_group_size = int(os.environ.get("LOCAL_WORLD_SIZE", size))
    if shard_group_size < 1 or size % shard_group_size != 0:
        raise ValueError(f"ringx.fsdp: HYBRID_SHARD needs shard_group_size to divide the "
                         f"world size {size}; got {shard_group_size}")
    key = (id(process_group), shard_group_size)
    if key not in _hybrid_groups_cache:
        if process_group is dist.distributed_c10d._get_default_group():
            global_ranks = list(range(size))
        else:
            mapping = dist.distributed_c10d._pg_group_ranks[process_group]
            global_ranks = [g for g, _ in sorted(mapping.items(), key=lambda kv: kv[1])]
        me = process_group.rank()
        mine_shard = mine_replicate = None
        for start in range(0, size, shard_group_size):
            ranks = global_ranks[start:start + shard_group_size]
            group = dist.new_group(ranks)
            if start <= me < start + shard_group_size:
                mine_shard = group
        for offset in range(shard_group_size):
            ranks = global_ranks[offset::shard_group_size]
            group = dist.new_group(ranks)
            if me % shard_group_size == offset:
                mine_replicate = group
        _hybrid_groups_cache[key] = (mine_shard, mine_replicate)
    return _hybrid_groups_cache[key]


class FullyShardedDataParallel(nn.Module):
    """Fully sharded data parallel over any process group (see the module doc).

    Arguments as torch.distributed.fsdp.FullyShardedDataParallel's (enums or their names
    as strings); auto_wrap_policy is a set of module classes, a minimum parameter count,
    or a callable(module) -> bool. shard_group_size sets S for HYBRID_SHARD (default: the
    LOCAL_WORLD_SIZE environment variable); process_group may also be a
    (shard group, replicate group) pair for it. gather_lane (ringx's default group,
    FULL_SHARD and SHARD_GRAD_OP): all-gathers run on a second group over the same ranks, so
    they overlap reduce-scatters instead of queueing behind them.
    """

    def __init__(self, module, process_group=None, sharding_strategy="FULL_SHARD",
                 auto_wrap_policy=None, backward_prefetch="BACKWARD_PRE",
                 forward_prefetch=False, limit_all_gathers=True, mixed_precision=None,
                 sync_module_states=False, shard_group_size=None, gather_lane=True):
        super().__init__()
        if isinstance(module, FullyShardedDataParallel):
            raise TypeError("ringx.fsdp: the module is already a FullyShardedDataParallel")
        if not dist.is_initialized():
            raise RuntimeError("ringx.fsdp: torch.distributed is not initialised; call "
                               "dist.init_process_group(...) first")
        strategy = _enum_name(sharding_strategy, ShardingStrategy, "sharding_strategy")
        if strategy == "NONE":
            raise ValueError("ringx.fsdp: sharding_strategy cannot be None")
        prefetch = _enum_name(backward_prefetch, BackwardPrefetch, "backward_prefetch")
        if mixed_precision is not None and not hasattr(mixed_precision, "param_dtype"):
            raise TypeError("ringx.fsdp: mixed_precision must be a ringx.fsdp.MixedPrecision "
                            "(or torch's), with param_dtype / reduce_dtype")
        param_dtype = getattr(mixed_precision, "param_dtype", None)
        reduce_dtype = getattr(mixed_precision, "reduce_dtype", None)

        shard_group = replicate_group = None
        if isinstance(process_group, tuple):
            if strategy != "HYBRID_SHARD":
                raise ValueError("ringx.fsdp: a (shard, replicate) pair of process groups is "
                                 "for HYBRID_SHARD")
            shard_group, replicate_group = process_group
            process_group = dist.distributed_c10d._get_default_group()
        elif process_group is None:
            process_group = dist.distributed_c10d._get_default_group()
        if strategy == "HYBRID_SHARD" and shard_group is None:
            shard_group, replicate_group = _hybrid_groups(process_group, shard_group_size)
        lane = None
        if (gather_lane and strategy in ("FULL_SHARD", "SHARD_GRAD_OP")
                and process_group is dist.distributed_c10d._get_default_group()
                and dist.get_backend(process_group) == "ringx"):
            lane = _gather_lane(process_group)
        self.process_group = process_group
        self._arguments = dict(
            process_group=process_group if shard_group is None
            else (shard_group, replicate_group),
            sharding_strategy=strategy, backward_prefetch=prefetch,
            forward_prefetch=forward_prefetch, limit_all_gathers=limit_all_gathers,
            mixed_precision=mixed_precision, sync_module_states=sync_module_states,
            shard_group_size=shard_group_size, gather_lane=gather_lane)
        self._param_dtype = param_dtype

        predicate = _wrap_predicate(auto_wrap_policy)
        if predicate is not None:
            self._auto_wrap(module, predicate)
        # Wrappers already inside `module` are units of this one, never roots.
        for inner in module.modules():
            if isinstance(inner, FullyShardedDataParallel):
                inner._is_root = False

        members, owners = _unit_members(module)
        if sync_module_states:
            with torch.no_grad():
                for buffer in self._own_buffers(module):
                    dist.broadcast(buffer, 0, group=process_group)
        self._unit = _C.fsdp.Unit(
            "", [(name, p) for _, _, p, name in members], strategy, process_group,
            shard_group, replicate_group, lane,
            None if param_dtype is None else str(param_dtype),
            None if reduce_dtype is None else str(reduce_dtype),
            sync_module_states, prefetch, forward_prefetch, limit_all_gathers)
        self._unit_params = [p for _, _, p, _ in members]
        # The original parameters leave the modules' parameter lists (the optimizer
        # must see the shards) but stay their attributes, so forward code is unchanged.
        for owner, attr, p, _ in members:
            if owner._parameters.get(attr) is p:
                owner._ringx_fsdp_hidden = getattr(owner, "_ringx_fsdp_hidden", []) + [attr]
                del owner._parameters[attr]
                owner.__dict__[attr] = p
        for path, owner in owners:
            owner.register_forward_pre_hook(self._make_direct_call_guard(path))
        shard = nn.Parameter(self._unit.shard, requires_grad=self._unit.shard.requires_grad)
        self._unit.adopt_shard(shard)
        self.flat_param = shard
        self.flat_param._fqns = [name for _, _, _, name in members]
        setattr(self, _WRAPPED, module)
        self._engine = None
        self._index = 0
        if not hasattr(self, "_is_root"):
            self._is_root = None

    # ---- construction helpers ------------------------------------------------------------

    def _auto_wrap(self, module, predicate):
        """Wraps matching descendants bottom-up, so a match's own matches are its units."""
        arguments = dict(self._arguments)
        for name, child in list(module.named_children()):
            if isinstance(child, FullyShardedDataParallel):
                continue
            self._auto_wrap(child, predicate)
            if predicate(child, _unwrapped_numel(child)) and _unwrapped_numel(child) > 0:
                setattr(module, name, FullyShardedDataParallel(child, **arguments))

    @staticmethod
    def _own_buffers(module):
        out = []

        def visit(mod):
            if isinstance(mod, FullyShardedDataParallel):
                return
            out.extend(b for b in mod._buffers.values() if b is not None)
            for child in mod._modules.values():
                if child is not None:
                    visit(child)

        visit(module)
        return out

    def _make_direct_call_guard(self, path):
        unit = self._unit

        def guard(module, inputs):
            if unit.state != "unsharded":
                where = path or type(module).__name__
                raise RuntimeError(
                    f"ringx.fsdp: module '{where}' was called directly, but its parameters are "
                    f"sharded by FullyShardedDataParallel; call the wrapping FSDP module (or use "
                    f"summon_full_params() to read the parameters)")
        return guard

    # ---- forward ---------------------------------------------------------------------------

    @property
    def module(self):
        """The wrapped module."""
        return getattr(self, _WRAPPED)

    def _wrappers(self):
        """This wrapper and the ones nested in it, in module order (the engine's unit order)."""
        return [m for m in self.modules() if isinstance(m, FullyShardedDataParallel)]

    def _lazy_init(self):
        if self._is_root is False:
            raise RuntimeError(
                "ringx.fsdp: this FullyShardedDataParallel is nested inside another one; call "
                "the outermost wrapper (it runs the nested units' gathers and reductions)")
        wrappers = self._wrappers()
        engine = _C.fsdp.Engine([w._unit for w in wrappers])
        for index, wrapper in enumerate(wrappers):
            wrapper._engine = engine
            wrapper._index = index
            wrapper._is_root = index == 0
        # Unit names (module paths without the wrapper level) for errors and trace events.
        for name, wrapper in self.named_modules():
            if isinstance(wrapper, FullyShardedDataParallel):
                wrapper._unit.set_name(_clean(name))

    def forward(self, *args, **kwargs):
        if self._engine is None:
            self._lazy_init()
        if self._is_root and self._param_dtype is not None:
            cast = lambda t: (t.to(self._param_dtype)
                              if isinstance(t, torch.Tensor) and t.is_floating_point() else t)
            args = tuple(cast(a) for a in args)
            kwargs = {k: cast(v) for k, v in kwargs.items()}
        self._engine.pre_forward(self._index)
        output = self.module(*args, **kwargs)
        self._engine.post_forward(self._index, _tensors(output))
        return output

    # ---- parameters and state ----------------------------------------------------------------

    def named_parameters(self, prefix="", recurse=True, *args, **kwargs):
        """The shards the optimizer updates, named by their unit ("<unit>.flat_param")."""
        for name, p in super().named_parameters(prefix=prefix, recurse=recurse, *args, **kwargs):
            yield _clean(name), p

    def _full_state(self, full_values, prefix, keep_vars):
        """The unwrapped module's state dict, in its own key order."""
        out = collections.OrderedDict()

        def visit(mod, path):
            if isinstance(mod, FullyShardedDataParallel):
                visit(mod.module, path)
                return
            names = list(mod._parameters.keys())
            hidden = getattr(mod, "_ringx_fsdp_hidden", [])
            for attr in hidden + [n for n in names if n not in hidden]:
                p = mod.__dict__.get(attr) if attr in hidden else mod._parameters.get(attr)
                if p is None:
                    continue
                value = full_values.get(id(p))
                out[path + attr] = value if value is not None else (p if keep_vars else p.detach())
            for name, b in mod._buffers.items():
                if b is not None and name not in mod._non_persistent_buffers_set:
                    out[path + name] = b if keep_vars else b.detach()
            for name, child in mod._modules.items():
                if child is not None:
                    visit(child, path + name + ".")

        visit(self.module, prefix)
        return out

    def _full_values(self):
        values = {}
        with torch.no_grad():
            for wrapper in self._wrappers():
                for p, value in zip(wrapper._unit_params, wrapper._unit.full_parameters()):
                    values[id(p)] = value
        return values

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """The full, unsharded state dict with the unwrapped module's keys (collective: every
        rank must call it)."""
        state = self._full_state(self._full_values(), prefix, keep_vars)
        if destination is None:
            return state
        destination.update(state)
        return destination

    def load_state_dict(self, state_dict, strict=True):
        """Loads a full state dict (as state_dict() returns, or the unwrapped module's)."""
        expected = self._full_state({}, "", keep_vars=True)  # key -> parameter or buffer
        key_of = {id(tensor): key for key, tensor in expected.items()}
        missing = [k for k in expected if k not in state_dict]
        unexpected = [k for k in state_dict if k not in expected]
        if strict and (missing or unexpected):
            raise RuntimeError(f"ringx.fsdp: load_state_dict: missing keys {missing}, "
                               f"unexpected keys {unexpected}")
        sharded = set()
        with torch.no_grad():
            for wrapper in self._wrappers():
                tensors = []
                for p in wrapper._unit_params:
                    sharded.add(id(p))
                    key = key_of[id(p)]
                    if key not in state_dict:
                        raise RuntimeError(f"ringx.fsdp: load_state_dict: '{key}' is missing; "
                                           f"a unit's parameters load together or not at all")
                    tensors.append(state_dict[key].detach())
                wrapper._unit.load_full_parameters(tensors)
            for key, tensor in expected.items():
                if id(tensor) not in sharded and key in state_dict:
                    tensor.copy_(state_dict[key])
        return nn.modules.module._IncompatibleKeys(missing, unexpected)

    def sharded_state_dict(self):
        """This rank's shards ("<unit>.flat_param", flat fp32) and the buffers: save one per
        rank, load with load_sharded_state_dict on the same world size and model."""
        out = collections.OrderedDict()
        for name, p in self.named_parameters():
            out[name] = p.detach().clone()
        for name, b in self.named_buffers():
            out[_clean(name)] = b.detach().clone()
        return out

    def load_sharded_state_dict(self, state_dict):
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name not in state_dict:
                    raise RuntimeError(f"ringx.fsdp: load_sharded_state_dict: '{name}' is missing")
                value = state_dict[name]
                if value.shape != p.shape:
                    raise RuntimeError(
                        f"ringx.fsdp: load_sharded_state_dict: '{name}' has {tuple(value.shape)} "
                        f"elements but this rank's shard has {tuple(p.shape)}: was it saved with "
                        f"another world size or model?")
                p.copy_(value)
            for name, b in self.named_buffers():
                if _clean(name) in state_dict:
                    b.copy_(state_dict[_clean(name)])

    # ---- runtime controls ----------------------------------------------------------------

    def _root_engine(self):
        if self._engine is None:
            self._lazy_init()
        return self._engine

    @contextlib.contextmanager
    def no_sync(self):
        """Backward accumulates unsharded gradients locally and reduces nothing; the first
        backward after the block reduces everything accumulated."""
        engine = self._root_engine()
        previous = engine.require_backward_grad_sync
        engine.require_backward_grad_sync = False
        try:
            yield
        finally:
            engine.require_backward_grad_sync = previous

    @contextlib.contextmanager
    def summon_full_params(self):
        """Inside the block every original parameter holds its full value (read-only: changes
        are not written back to the shards)."""
        engine = self._root_engine()
        engine.unshard_all()
        try:
            yield
        finally:
            engine.reshard_all()

    def memory_stats(self):
        """Bytes the engine holds now (sharded_bytes, unsharded_bytes, grad_bytes) and the
        peak of their sum (peak_bytes) since construction or reset_peak_memory()."""
        return self._root_engine().memory()

    def reset_peak_memory(self):
        self._root_engine().reset_peak_memory()

    def units(self):
        """[(unit name, sharding strategy, parameter names, unsharded numel)], in unit order."""
        out = []
        for name, wrapper in self.named_modules():
            if isinstance(wrapper, FullyShardedDataParallel):
                unit = wrapper._unit
                out.append((_clean(name), unit.sharding_strategy, list(wrapper.flat_param._fqns),
                            unit.total_numel))
        return out
