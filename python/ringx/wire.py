"""Bytes on the wire as the kernel counts them, for any backend.

ringx.traffic(group) reports what ringx's own transports moved (shared memory and TCP).
Other backends (gloo) keep no such counters, but their bytes go through TCP sockets of
this process, and Linux counts every socket's traffic (struct tcp_info, RFC 4898's
tcpEStatsPerfHCDataOctetsOut/In, less retransmissions). tcp_traffic() sums those counters
over the process's TCP sockets, so that one outside tool measures gloo and ringx-over-TCP alike:

    before = ringx.wire.tcp_traffic()
    step()
    sent = ringx.wire.tcp_traffic().sent - before.sent

bytes_sent(ringx_groups) adds what ringx's shared-memory connections moved: the bytes a
process put on the wire, for any mix of backends (bench/fsdp.py's "sent" column).

Sockets opened and closed between two calls are not seen; process groups keep theirs
open, and a rendezvous store's traffic counts too (none happens inside a collective).
"""

import os
import socket
import struct
from typing import NamedTuple

# Offsets in struct tcp_info (linux/tcp.h): tcpi_bytes_received (u64) since Linux 4.1,
# tcpi_bytes_sent and tcpi_bytes_retrans (u64) since 4.19. A shorter answer means an older
# kernel.
_BYTES_RECEIVED_OFFSET = 128
_BYTES_SENT_OFFSET = 200
_BYTES_RETRANS_OFFSET = 208
_TCP_INFO_BYTES = _BYTES_RETRANS_OFFSET + 8


class TcpTraffic(NamedTuple):
    # Payload bytes handed to the network once: a retransmission (tail-loss probes happen
    # even on loopback when the receiver is slow to drain) is the same byte again.
    sent: int
    received: int
    sockets: int  # TCP sockets summed over


def tcp_sockets():
    """Yields this process's TCP sockets (IPv4 and IPv6), each a duplicate of the process's
    descriptor that is closed when the caller moves on to the next."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if not os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                continue
            sock = socket.socket(fileno=os.dup(int(name)))
        except OSError:
            continue  # closed meanwhile, or not a socket Python can wrap
        with sock:
            if sock.family in (socket.AF_INET, socket.AF_INET6) and \
                    sock.type == socket.SOCK_STREAM:
                yield sock


def tcp_traffic() -> TcpTraffic:
    """Payload bytes sent and received so far over all of this process's TCP sockets,
    from the kernel's per-socket counters (TCP_INFO)."""
    sent = received = count = 0
    for sock in tcp_sockets():
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_BYTES)
        if len(info) < _TCP_INFO_BYTES:
            raise RuntimeError("ringx.wire.tcp_traffic needs Linux 4.19 or newer "
                               "(tcp_info.tcpi_bytes_sent)")
        received += struct.unpack_from("=Q", info, _BYTES_RECEIVED_OFFSET)[0]
        sent += struct.unpack_from("=Q", info, _BYTES_SENT_OFFSET)[0] - \
            struct.unpack_from("=Q", info, _BYTES_RETRANS_OFFSET)[0]
        count += 1
    return TcpTraffic(sent, received, count)


def bytes_sent(ringx_groups=()) -> int:
    """Bytes this process has put on the wire so far, whatever the backend: TCP from the
    kernel's counters (gloo's sockets, ringx's TCP connections, stores), plus what ringx's
    shared-memory connections in `ringx_groups` moved (no kernel counter sees those)."""
    from . import traffic

    shm = sum(entry["sent"] for group in ringx_groups for entry in traffic(group)
              if entry["transport"] == "shm")
    return tcp_traffic().sent + shm
