"""Hosts joined by links of a set speed (netns_hosts.Hosts(..., rate_mbit=R)): what iperf3
carries between two of them, each way, is the rate within 5% (TCP's payload share of it: tbf
counts whole frames), hosts beyond two reach each other through the switch, and a delay is
refused where the kernel has no netem. The harness the linked-hosts what-if check and the demo
run on."""

import shutil

import pytest

import netns_hosts

REASON = netns_hosts.why_unshaped() or (
    None if shutil.which("iperf3") else "needs iperf3 (scripts/setup.sh installs it)")
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


def test_a_shaped_link_carries_its_rate_each_way():
    rate = 200
    expected = rate * netns_hosts.TCP_PAYLOAD_SHARE
    with netns_hosts.Hosts(["a", "b"], rate_mbit=rate) as hosts:
        there = hosts.iperf("a", "b", 2, enough=0.95 * expected)
        back = hosts.iperf("a", "b", 2, reverse=True, enough=0.95 * expected)
    for measured in (there, back):
        assert abs(measured / expected - 1) <= 0.05, (there, back, expected)


def test_the_link_not_the_machine_sets_the_rate():
    # A quarter of the rate carries a quarter: the shaping, not the cores, is the bottleneck.
    with netns_hosts.Hosts(["a", "b"], rate_mbit=50) as hosts:
        measured = hosts.iperf("b", "a", 2, enough=0.95 * 50 * netns_hosts.TCP_PAYLOAD_SHARE)
    assert abs(measured / (50 * netns_hosts.TCP_PAYLOAD_SHARE) - 1) <= 0.05, measured


RECEIVE = """
import socket, sys, time
warm, size = int(sys.argv[2]), int(sys.argv[3])
server = socket.create_server((sys.argv[1], 29600))
print("READY", flush=True)
conn, _ = server.accept()
got = 0
while got < warm + size:
    chunk = conn.recv(1 << 20)
    if not chunk:
        break
    got += len(chunk)
print(time.monotonic())  # the last byte's arrival, on the clock every namespace shares
"""

SEND = """
import socket, sys, time
warm, size = int(sys.argv[2]), int(sys.argv[3])
for _ in range(100):
    try:
        conn = socket.create_connection((sys.argv[1], 29600))
        break
    except OSError:
        time.sleep(0.05)
conn.sendall(bytes(warm))
time.sleep(0.1)  # idle: a token bucket fills, TCP keeps its window (under its RTO)
print(time.monotonic(), flush=True)  # before the first byte leaves
conn.sendall(bytes(size))
conn.close()
"""


def test_a_shaped_link_lets_no_burst_through_after_an_idle_moment():
    # 4 MiB sent on a warm connection after 0.1 s idle take the link's time, from the sender's
    # clock before the first byte to the receiver's after the last: a token bucket of a kernel
    # tick's bytes (500 KB at 1 Gbit/s) had let an eighth of them through at once
    # (netns_hosts.BUCKET_BYTES). A busy machine only makes it slower: either side starved of a
    # core reads its clock later. (Timed on the receiver alone, from its first byte, a late
    # receiver found the first bytes waiting with others and measured too short.)
    import sys
    rate, size = 1000, 4 << 20
    with netns_hosts.Hosts(["a", "b"], rate_mbit=rate) as hosts:
        receiver = hosts.start("b", [sys.executable, "-c", RECEIVE, hosts.address["b"],
                                     str(1 << 20), str(size)], None)
        assert receiver.stdout.readline().strip() == "READY"
        sender = hosts.start("a", [sys.executable, "-c", SEND, hosts.address["b"],
                                   str(1 << 20), str(size)], None)
        out, err = receiver.communicate(timeout=60)
        sent, sent_err = sender.communicate(timeout=60)
    link_s = size * 8 / (rate * 1e6 * netns_hosts.TCP_PAYLOAD_SHARE)
    assert float(out) - float(sent) >= 0.95 * link_s, (out, err, sent, sent_err, link_s)


def test_a_shaped_hosts_tcp_keeps_to_the_link_loss_based():
    # Not the machine's BBR, whose probing after an idle moment slowed a lone allreduce by 14%
    # (netns_hosts.LOSS_BASED_CC).
    with netns_hosts.Hosts(["a"], rate_mbit=100) as hosts:
        out, err = hosts.start("a", ["sysctl", "-n", "net.ipv4.tcp_congestion_control"],
                               None).communicate(timeout=30)
    assert out.strip() == netns_hosts.LOSS_BASED_CC, (out, err)


def test_three_hosts_reach_each_other_through_the_switch():
    with netns_hosts.Hosts(["a", "b", "c"], rate_mbit=100) as hosts:
        for client, server in (("c", "a"), ("b", "c")):
            measured = hosts.iperf(client, server, 1)
            assert 0.5 * 100 < measured <= 100, (client, server, measured)


def test_a_delay_needs_netem():
    hosts = netns_hosts.Hosts(["a", "b"], rate_mbit=100, delay_ms=5)
    if netns_hosts._has_netem():
        with hosts:
            pass  # made; its delay is the kernel's to keep
        return
    with pytest.raises(RuntimeError, match="netem"):
        with hosts:
            pass


BUSY = """
import os, sys, time
def cpu():
    t = os.times()
    return t.user + t.system
begin, used = time.monotonic(), cpu()
while time.monotonic() < begin + float(sys.argv[1]):
    pass
print(cpu() - used, time.monotonic() - begin)  # the loop's CPU and wall time, not the start's
"""


@pytest.mark.skipif(netns_hosts.why_no_cpu_share() is not None,
                    reason=netns_hosts.why_no_cpu_share() or "")
def test_a_hosts_cpu_share_is_the_most_its_processes_get():
    # Three hosts of 0.3 of a core, each spinning 1.5 s on this 2-core machine: unshared, each
    # would get 2/3 of a core; each gets its share (a CFS quota), however idle the machine is.
    import sys
    seconds, share = 1.5, 0.3
    with netns_hosts.Hosts(["a", "b", "c"], cpus=share) as hosts:
        procs = [hosts.start(h, [sys.executable, "-c", BUSY, str(seconds)], None)
                 for h in ("a", "b", "c")]
        used = [tuple(map(float, p.communicate(timeout=60)[0].split())) for p in procs]
    for cpu, wall in used:
        # Two periods' quota of slack (the loop's first and last, partly its own), and os.times'
        # 10 ms ticks.
        assert 0.02 < cpu <= share * (wall + 2 * netns_hosts.CPU_PERIOD_US / 1e6) + 0.03, used
