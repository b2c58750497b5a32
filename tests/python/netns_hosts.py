"""Separate "hosts" on one machine for tests, benchmarks and the demo: network namespaces, each
joined by its own link (a veth pair) to a switch (a bridge in a namespace of its own), each
process started in its host's namespace with its own UTS hostname, so ringx sees different
hosts and talks TCP between them over addresses that exist only inside the namespaces.

    with Hosts(["a", "b"]) as hosts:          # 10.77.0.1 (a), 10.77.0.2 (b)
        p = hosts.start("a", [python, "worker.py", ...], env)
        hosts.cut()                           # link down: a partition, no RST on either side
    with Hosts(["a", "b", "c"], rate_mbit=200) as hosts:   # every link 200 Mbit/s each way
    with Hosts(["a", "b"], rate_mbit=200, cpus=0.45) as hosts:  # and 0.45 of a core each

A link of a set speed is shaped by a token bucket (tc's tbf) on both of its ends, the host's
and the switch's, so that what a host sends and what it receives each go at the rate (measured
here: 200 Mbit/s carried 195 in iperf3), and their TCP is loss-based (reno, not this machine's
BBR: LOSS_BASED_CC says why). A delay needs netem, which some kernels lack (this
machine's does): asked for there, Hosts refuses saying so. `why_unshaped()` says why links
cannot be shaped (no tc, no tbf), for a skip.

A host may be given a CPU of its own (`cpus`, a share of one core): its processes are a
cgroup whose CFS quota is that share, so 2, 3 or 4 hosts on this 2-core machine each compute at
the same speed whatever the others do, as separate machines would (without it, 4 hosts' ranks
share 2 cores, and a job on more hosts computes slower than one on 2). `why_no_cpu_share()`
says why a host cannot have one here.

`run_job` runs a whole fault job on two such hosts (netns_worker.py is each rank): the fault
tests (test_partitions.py) and the gloo-beside-ringx fault benchmark (bench/faults.py) share it.
Its ranks are forked from the fork server that imported torch and ringx once
(harness.rank_context) and enter their host themselves (`Hosts.fork`): a rank started fresh
imported torch again, about 3 s of a core each, most of what a fault test took.

Creating namespaces needs root (CAP_NET_ADMIN); `why_unavailable()` says why not, for a skip
(`bench_skipped()`: a benchmark's).
"""

import atexit
import contextlib
import ctypes
import json
import os
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from multiprocessing import reduction

from harness import rank_context, ringx_shm_segments

SUBNET = "10.77.0"
HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT_S = 4.0  # the fault jobs' group timeout


def why_unavailable():
    if os.geteuid() != 0:
        return "needs root to create network namespaces (ip netns)"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"needs {tool} (iproute2, util-linux) to create test hosts"
    return None


def bench_skipped(name, docs, why=why_unavailable):
    """For a benchmark on these hosts (bench/faults.py, bench/tcp_line_rate.py): True when it
    cannot run here, having printed why (`why()`, this module's reason or the bench's own) and,
    with --docs, that nothing was written; the bench then exits 0."""
    reason = why()
    if reason is None:
        return False
    print(f"{name}: skipped, {reason}")
    if docs:
        print(f"{name}: --docs: nothing written", file=sys.stderr)
    return True


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _tc(*args):
    done = subprocess.run(["tc", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"tc {' '.join(args)}: {done.stderr.strip()}")


# A shaped link's token bucket. A bucket lets a burst of its size through at the veth's speed
# after an idle moment: sized to a kernel tick's bytes (1 Gbit/s: 500 KB), it made a lone 4 MB
# allreduce take 0.89 of the link's time at 1 Gbit/s and 0.97 at 250 Mbit/s, a link faster than
# its rate by an amount that changes with the rate (the what-if's slower links missed by 6-7%);
# a real link has no such burst. One size at every rate, the least that carries the rate: the
# bucket refills on a high-resolution timer, not the tick, but must hold two of the device's
# largest (GSO) segments of 64 KiB. Measured: a 4 MB allreduce alone takes 0.98 of the link's
# time at 250 Mbit/s, 1.01 at 1 and 1.00 at 2 Gbit/s; iperf3 carries the rate's TCP payload
# share. (Segments of 16 KiB and a 64 KiB bucket came to within 1% at every rate, but the
# kernel's work per byte they cost slowed 4 hosts of 0.4 of a core by half.)
BUCKET_BYTES = 128 << 10


def _shape(ns, dev, rate_mbit, delay_ms):
    """The egress of `dev` (in namespace `ns`) at `rate_mbit`, after `delay_ms` if any."""
    tbf = ["rate", f"{rate_mbit:g}mbit", "burst", str(BUCKET_BYTES), "latency", "50ms"]
    if delay_ms:
        _tc("-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay",
            f"{delay_ms}ms")
        _tc("-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "tbf", *tbf)
    else:
        _tc("-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", *tbf)


# The TCP congestion control of the hosts with shaped links. This machine's default is BBR, whose
# probing for bandwidth after an idle moment made a lone 17 MB allreduce on a 1 Gbit/s link 14%
# slower than the link (median of 30; four 4 MB ones back to back went at the link's rate), a
# behaviour of BBR against a token bucket that a DDP step's what-if cannot know; a loss-based
# one (CUBIC, most Linux hosts' default, or reno) keeps the link's rate. A namespace may choose
# only from net.ipv4.tcp_allowed_congestion_control, which here is "reno bbr": reno.
LOSS_BASED_CC = "reno"


def _congestion_control(ns, name):
    done = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                           f"net.ipv4.tcp_congestion_control={name}"], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"TCP congestion control {name} in {ns}: {done.stderr.strip()}")


def why_unshaped():
    """Why links cannot be shaped here (None: they can): needs the namespaces and tc's tbf."""
    reason = why_unavailable()
    if reason is not None:
        return reason
    if shutil.which("tc") is None:
        return "needs tc (iproute2) to shape the hosts' links"
    try:
        with _probe() as (ns, dev):
            _shape(ns, dev, 100, 0)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        return f"cannot shape a link with tc's tbf here ({e})"
    return None


@contextlib.contextmanager
def _probe():
    """A namespace with a veth pair in it, for trying a qdisc: (namespace, device)."""
    ns = f"rx-probe-{uuid.uuid4().hex[:6]}"
    try:
        _ip("netns", "add", ns)
        _ip("-n", ns, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
        yield ns, "probe0"
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


# TCP's payload share of what a shaped link carries (tbf counts each frame whole): 1448 bytes of
# a 1514-byte Ethernet frame at the veth's MTU of 1500 (IP and TCP headers, TCP's timestamps).
TCP_PAYLOAD_SHARE = 1448 / 1514


# A host's CPU share is enforced per CFS period: a short one, so that a rank out of quota waits
# for at most a few ms (the default 100 ms period would stall a step for tens of ms at a time).
CPU_PERIOD_US = 10_000


def _cpu_cgroup_root():
    """Where cgroups with a CPU quota are made: cgroup v2's root where its cpu controller is
    enabled there, else v1's cpu hierarchy; (path, version), or None."""
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        try:
            with open(os.path.join(root, "cgroup.subtree_control")) as f:
                if "cpu" in f.read().split():
                    return root, 2
        except OSError:
            pass
    if os.path.exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
        return "/sys/fs/cgroup/cpu", 1
    return None


def why_no_cpu_share():
    """Why a host cannot be given a CPU share here (None: it can): needs a writable cgroup
    hierarchy with the cpu controller (v2's cpu.max or v1's CFS quota)."""
    reason = why_unavailable()
    if reason is not None:
        return reason
    found = _cpu_cgroup_root()
    if found is None:
        return "no cgroup hierarchy with the cpu controller (/sys/fs/cgroup) to give a host a CPU share"
    try:
        group = _CpuShare(f"rx-probe-{uuid.uuid4().hex[:6]}", 0.5)
        group.close()
    except OSError as e:
        return f"cannot make a cgroup with a CPU quota in {found[0]} ({e})"
    return None


class _CpuShare:
    """A cgroup whose processes together get `cpus` of a core (CFS quota per CPU_PERIOD_US)."""

    def __init__(self, name, cpus):
        found = _cpu_cgroup_root()
        if found is None:
            raise OSError("no cgroup hierarchy with the cpu controller")
        root, version = found
        self.path = os.path.join(root, name)
        os.mkdir(self.path)
        quota = max(1000, int(cpus * CPU_PERIOD_US))
        try:
            if version == 2:
                self._write("cpu.max", f"{quota} {CPU_PERIOD_US}")
            else:
                self._write("cpu.cfs_period_us", str(CPU_PERIOD_US))
                self._write("cpu.cfs_quota_us", str(quota))
        except OSError:
            self.close()
            raise

    def _write(self, name, value):
        with open(os.path.join(self.path, name), "w") as f:
            f.write(value)

    def procs(self):
        """The file a process writes its pid to, to join (with every thread it starts later)."""
        return os.path.join(self.path, "cgroup.procs")

    def close(self):
        # Every process of the group has exited (Hosts kills and reaps them first); a cgroup
        # goes only once empty, and its last processes may take a moment to leave it.
        for _ in range(100):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


class Hosts:
    """Hosts `names` (up to 250), each linked to one switch; `rate_mbit`: every link's rate each
    way (None: unshaped); `delay_ms`: added each way on each link (needs netem); `cpus`: each
    host's CPU, a share of one core that its processes together get (None: the machine's)."""

    def __init__(self, names, rate_mbit=None, delay_ms=0, cpus=None):
        assert 1 <= len(names) <= 250, "one subnet: up to 250 hosts"
        tag = uuid.uuid4().hex[:6]
        self.names = list(names)
        self.rate_mbit = rate_mbit
        self.delay_ms = delay_ms
        self.netns = {name: f"rx-{tag}-{name}" for name in names}
        self.switch = f"rx-{tag}-switch"
        self.device = {name: f"rx{tag}{i}" for i, name in enumerate(names)}  # in its host
        self.port = {name: f"rx{tag}p{i}" for i, name in enumerate(names)}    # on the switch
        self.address = {name: f"{SUBNET}.{i + 1}" for i, name in enumerate(names)}
        self.cpus = cpus
        self.cpu_share = {}  # name -> _CpuShare, with `cpus`
        self.procs = []

    def __enter__(self):
        if self.delay_ms and not _has_netem():
            raise RuntimeError(
                f"a delay of {self.delay_ms} ms needs tc's netem, which this kernel lacks "
                "(\"Specified qdisc kind is unknown\"): ask for a rate alone")
        try:
            _ip("netns", "add", self.switch)
            _ip("-n", self.switch, "link", "add", "switch", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "switch", "up")
            for name in self.names:
                ns, dev, port = self.netns[name], self.device[name], self.port[name]
                _ip("netns", "add", ns)
                _ip("link", "add", dev, "type", "veth", "peer", "name", port)
                _ip("link", "set", dev, "netns", ns)
                _ip("link", "set", port, "netns", self.switch)
                _ip("-n", self.switch, "link", "set", port, "master", "switch")
                _ip("-n", self.switch, "link", "set", port, "up")
                _ip("-n", ns, "addr", "add", f"{self.address[name]}/24", "dev", dev)
                _ip("-n", ns, "link", "set", dev, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                if self.rate_mbit:
                    _congestion_control(ns, LOSS_BASED_CC)
                    _shape(ns, dev, self.rate_mbit, self.delay_ms)
                    _shape(self.switch, port, self.rate_mbit, self.delay_ms)
                if self.cpus:
                    self.cpu_share[name] = _CpuShare(ns, self.cpus)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for ns in [*self.netns.values(), self.switch]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        for share in self.cpu_share.values():
            share.close()

    def _cgroup_procs(self, name):
        share = self.cpu_share.get(name)
        return share.procs() if share else None

    def start(self, name, argv, env):
        """Starts argv on host `name`: in its namespace, with hostname `host-<name>` (and in its
        CPU share, where it has one)."""
        wrapped = ["ip", "netns", "exec", self.netns[name], "unshare", "--uts", "sh", "-c",
                   f'hostname host-{name} && exec "$@"', "sh", *argv]
        procs = self._cgroup_procs(name)
        if procs:
            # Joined before `ip netns exec`, which mounts the namespace's own /sys (no cgroups
            # there); what it starts inherits the group.
            wrapped = ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *wrapped]
        p = subprocess.Popen(wrapped, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.procs.append(p)
        return p

    def fork(self, name, script, argv, env):
        """Runs the Python `script` with `argv` on host `name`, as `start` would, in a process
        forked from the fork server (torch and ringx already imported). Returns what run_job
        uses of a Popen: pid, stdout, stderr, poll, wait, kill, communicate, returncode."""
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        p = rank_context().Process(target=_forked_main,
                        args=(self.netns[name], f"host-{name}", script, list(argv), dict(env),
                              _InheritedFd(out_w), _InheritedFd(err_w),
                              self._cgroup_procs(name)))
        try:
            p.start()
        finally:
            os.close(out_w)  # the child holds the write ends now: its exit is their EOF
            os.close(err_w)
        forked = _ForkedProcess(p, out_r, err_r)
        self.procs.append(forked)
        return forked

    def iperf(self, client, server, seconds, reverse=False, enough=None, tries=3):
        """Mbit/s of TCP payload `server` received from `client` (with `reverse`, `client` from
        `server`) over one iperf3 stream for `seconds`: what the link carries (TCP_PAYLOAD_SHARE
        of its rate where it is shaped). With `enough` (Mbit/s), the most of up to `tries` runs,
        the first that carries `enough` ending it: a run that the machine's other work starves of
        a core carries less than the link (161 of 191 Mbit/s once, with make test's three pytest
        streams beside it), and the link's rate is the most it carries."""
        best = 0.0
        for _ in range(tries if enough is not None else 1):
            best = max(best, self._iperf_once(client, server, seconds, reverse))
            if enough is None or best >= enough:
                break
        return best

    def _iperf_once(self, client, server, seconds, reverse):
        address = self.address[server]
        srv = self.start(server, ["iperf3", "-s", "-B", address], None)
        try:
            for _ in range(50):  # until the server listens and a test runs
                cli = self.start(client, ["iperf3", "-c", address, "-t", str(seconds), "-J",
                                          *(["-R"] if reverse else [])], None)
                out, err = cli.communicate(timeout=seconds + 30)
                try:
                    result = json.loads(out)
                except ValueError:
                    result = {}
                received = result.get("end", {}).get("sum_received")
                if cli.returncode == 0 and received:
                    return received["bits_per_second"] / 1e6
                time.sleep(0.1)
            raise RuntimeError(f"iperf3 from {client} to {server}: {err or out}")
        finally:
            srv.kill()
            srv.wait()

    def run(self, script, ranks, argv_of, env, timeout):
        """Runs the Python `script` as every rank of a job, rank r on host ranks[r] (forked, as
        `fork`) with argv_of(r); returns each rank's last JSON line of output, raising with the
        rank's output where one fails or outlives `timeout` seconds."""
        procs = [self.fork(host, script, argv_of(r), env) for r, host in enumerate(ranks)]
        reports, deadline = [], time.monotonic() + timeout
        for r, p in enumerate(procs):
            try:
                out, err = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                out, err = p.communicate()
                raise RuntimeError(f"rank {r} outlived {timeout} s:\n{out}\n{err}")
            lines = [line for line in out.splitlines() if line.startswith("{")]
            if p.returncode != 0 or not lines:
                raise RuntimeError(f"rank {r} exited {p.returncode}:\n{out}\n{err}")
            reports.append(json.loads(lines[-1]))
        return reports

    def cut(self, name=None):
        """Takes host `name`'s link down (the first host's by default), on its side: packets
        stop, no RST reaches either side."""
        name = name or self.names[0]
        _ip("-n", self.netns[name], "link", "set", self.device[name], "down")


def _has_netem():
    try:
        with _probe() as (ns, dev):
            _tc("-n", ns, "qdisc", "add", "dev", dev, "root", "netem", "delay", "1ms")
        return True
    except (RuntimeError, subprocess.CalledProcessError):
        return False


_CLONE_NEWNET, _CLONE_NEWUTS = 0x40000000, 0x04000000


class _InheritedFd:
    """A descriptor handed to a process of the fork server: pickled with the process, the
    server passes it on (as multiprocessing passes a Connection's)."""

    def __init__(self, fd):
        self.fd = fd

    def __reduce__(self):
        return _inherited, (reduction.DupFd(self.fd),)


def _inherited(dup):
    return _InheritedFd(dup.detach())


def _forked_main(netns, hostname, script, argv, env, stdout, stderr, cgroup_procs):
    """A process of Hosts.fork: its output to the pipes, into the host (what `ip netns exec`
    and `unshare --uts` do for Hosts.start, and its CPU share's cgroup where it has one), then
    the script as __main__."""
    if cgroup_procs:
        with open(cgroup_procs, "w") as f:
            f.write(str(os.getpid()))
    os.dup2(stdout.fd, 1)
    os.dup2(stderr.fd, 2)
    os.close(stdout.fd)
    os.close(stderr.fd)
    os.environ.clear()
    os.environ.update(env)
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/var/run/netns/{netns}") as ns:
        if libc.setns(ns.fileno(), _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into network namespace {netns}")
    if libc.unshare(_CLONE_NEWUTS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUTS)")
    socket.sethostname(hostname)
    sys.argv = [script, *argv]
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        # A forked process ends with os._exit, which skips what a fresh one runs at exit
        # (ringx writes out its trace there): run it, as harness._rank_main does.
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()


class _ForkedProcess:
    """The Popen face of a Hosts.fork process."""

    def __init__(self, process, stdout_fd, stderr_fd):
        self._process = process
        self.pid = process.pid
        self.stdout = os.fdopen(stdout_fd, "r")
        self.stderr = os.fdopen(stderr_fd, "r")
        self.returncode = None
        self._readers = None
        self._read = {}

    def poll(self):
        if self.returncode is None:
            self.returncode = self._process.exitcode  # -N when signal N ended it, as Popen's
        return self.returncode

    def wait(self, timeout=None):
        self._process.join(timeout)
        if self.poll() is None:
            raise subprocess.TimeoutExpired(f"forked {self.pid}", timeout)
        return self.returncode

    def kill(self):
        if self.poll() is None:
            self._process.kill()

    def communicate(self, timeout=None):
        """(stdout, stderr) once the process has ended; TimeoutExpired keeps what was read,
        so a kill and a second call get all of it, as with Popen."""
        if self._readers is None:
            def drain(key, stream):
                self._read[key] = stream.read()
            self._readers = [threading.Thread(target=drain, args=(key, stream), daemon=True)
                             for key, stream in (("out", self.stdout), ("err", self.stderr))]
            for reader in self._readers:
                reader.start()
        deadline = None if timeout is None else time.monotonic() + timeout

        def left():
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        for reader in self._readers:
            reader.join(left())
            if reader.is_alive():
                raise subprocess.TimeoutExpired(f"forked {self.pid}", timeout)
        self.wait(left())
        self.stdout.close()
        self.stderr.close()
        return self._read["out"], self._read["err"]


def _read_ready(procs, deadline):
    """Waits until every process printed READY; returns False if one failed first."""
    waiting = {p.stdout.fileno(): p for p in procs}
    while waiting and time.monotonic() < deadline:
        ready, _, _ = select.select(list(waiting), [], [], 0.2)
        for fd in ready:
            line = waiting[fd].stdout.readline()
            if line.strip() == "READY":
                del waiting[fd]
            elif line == "":
                return False
    return not waiting


STORE_SERVER = """
import datetime, sys, time
import torch.distributed as dist
store = dist.TCPStore(sys.argv[1], 29500, int(sys.argv[2]), is_master=True,
                      timeout=datetime.timedelta(seconds=60), wait_for_workers=False)
print("READY", flush=True)
time.sleep(3600)
"""


class JobHung(AssertionError):
    """A rank did not exit in time after the fault: the failure the fault tests exist for."""


def run_job(layout, elements, subgroup=False, cut=None, signal_rank=None, sig=None,
            extra_args=None, iterations=None, separate_store=False, store_sig=None,
            during=None, before_exit=None, backend="ringx", exit_within=TIMEOUT_S + 30,
            fault_after=0.5):
    """Runs one job; `layout` maps host name -> number of ranks (ranks numbered host by host).
    Once every rank is running collectives, the fault strikes: with `cut`, that host's side
    of the link goes down; with `signal_rank`, that rank gets `sig` (SIGKILL: dead; SIGSTOP:
    stuck, continued once the others have their errors). `extra_args(rank)` adds worker
    arguments (faults a worker makes itself). With `separate_store` the TCPStore is a process of
    its own on the first host (not rank 0), which gets `store_sig` before the fault (SIGKILL:
    its host lost; SIGSTOP: it hangs, holding its connections open, until the job is over).
    `during(hosts, procs)` runs once the ranks are running, `before_exit()` once they have exited
    (its result lands in rank 0's report as "_before_exit"). `backend` is what the ranks run
    (gloo, to compare); a rank still running `exit_within` seconds after the fault raises
    JobHung. The fault strikes `fault_after` seconds after every rank is running. Returns (the time of the fault, [each rank's report, None for a killed rank])."""
    with Hosts(list(layout)) as hosts:
        first = list(layout)[0]
        init = f"tcp://{hosts.address[first]}:29500"
        world = sum(layout.values())
        env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", ""),
                   OMP_NUM_THREADS="1")
        store = None
        if separate_store:
            store = hosts.start(first, [sys.executable, "-c", STORE_SERVER,
                                        hosts.address[first], str(world)], env)
            assert _read_ready([store], time.monotonic() + 30), store.communicate()
        faulted = cut is not None or sig is not None
        if iterations is None:
            iterations = 0 if faulted else 20
        procs, rank = [], 0
        for host, count in layout.items():
            for _ in range(count):
                argv = ["--backend", backend, "--rank",
                        str(rank), "--world", str(world), "--init", init, "--timeout",
                        str(TIMEOUT_S), "--elements", str(elements),
                        "--iterations", str(iterations)]
                if subgroup:
                    argv.append("--subgroup")
                if separate_store:
                    argv += ["--store", f"{hosts.address[first]}:29500"]
                argv += extra_args(rank) if extra_args else []
                # gloo binds to the hostname's address unless told an interface (no DNS here).
                procs.append(hosts.fork(host, os.path.join(HERE, "netns_worker.py"), argv,
                                        dict(env, GLOO_SOCKET_IFNAME=hosts.device[host])))
                rank += 1
        started = _read_ready(procs, time.monotonic() + 90)
        if started and store_sig is not None:
            time.sleep(0.3)
            os.kill(store.pid, store_sig)
        if started and during is not None:
            during(hosts, procs)
        cut_at = None
        if started and faulted:
            time.sleep(fault_after)  # collectives in flight on every rank
            cut_at = time.monotonic()
            if cut is not None:
                hosts.cut(cut)
            else:
                os.kill(procs[signal_rank].pid, sig)
        reports = []
        order = [r for r in range(len(procs)) if r != signal_rank] + (
            [signal_rank] if signal_rank is not None else [])
        for r in order:
            p = procs[r]
            if r == signal_rank and sig == signal.SIGKILL:
                p.wait()
                reports.append((r, None))
                continue
            if r == signal_rank and sig == signal.SIGSTOP:
                os.kill(p.pid, signal.SIGCONT)  # the others have their errors: let it go on
            try:
                out, err = p.communicate(timeout=exit_within)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
                raise JobHung(f"rank {r} did not exit within {exit_within} s of the fault\n{err}")
            lines = [l for l in out.splitlines() if l.startswith("{")]
            assert p.returncode == 0 and lines, f"rank {r} exited {p.returncode}:\n{out}\n{err}"
            reports.append((r, json.loads(lines[-1])))
        if before_exit is not None:
            dict(reports)[0]["_before_exit"] = before_exit()
        if store is not None:
            store.kill()
            store.wait()
    # Each rank's pid names its segments.
    left = ringx_shm_segments([p.pid for p in procs])
    assert left == [], f"shared-memory segments left behind: {left}"
    return cut_at, [report for _, report in sorted(reports, key=lambda item: item[0])]
