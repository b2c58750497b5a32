"""ringx's reported figures, each defined once (analysis/figures.h in the C++ sources) and
shared by `ringx-trace summary`, ringx-viewer, the engines and the benchmarks:

    bus_bandwidth_factor(op, group_size)      nccl-tests' factor: 2(n-1)/n for allreduce, ...
    bus_bandwidth_gbps(op, bytes, duration_ns, group_size)
    hidden_share([(wire_ns, exposed_ns), ...]) 1 - sum(min(exposed, wire)) / sum(wire)

ringx.ddp's last_iteration() carries its iteration's "hidden_share" computed the same way.
"""

from ._C.analysis import bus_bandwidth_factor, bus_bandwidth_gbps, hidden_share

__all__ = ["bus_bandwidth_factor", "bus_bandwidth_gbps", "hidden_share"]
