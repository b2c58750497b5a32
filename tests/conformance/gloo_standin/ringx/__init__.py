"""A stand-in "ringx" that hands out gloo process groups, for make_baseline.sh only.

Run with BACKEND=ringx, the conformance driver takes the same path as for the real ringx (a
plugin backend named "ringx", the plugin/ddp/subgroup features), so the tests that pass with
this stand-in are the tests that the suite lets a plugin backend reach: the
plugin_reachable_ws<N>.txt lists. It is never on the path of make test.
"""

import torch.distributed as dist


def _create_gloo(store, rank, size, timeout):
    return dist.ProcessGroupGloo(store, rank, size, timeout)


if "RINGX" not in getattr(dist.Backend, "_plugins", {}):
    dist.Backend.register_backend("ringx", _create_gloo, devices=["cpu"])
