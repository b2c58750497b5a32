"""Separate "hosts" on one machine for tests: network namespaces joined by a veth pair, each
process started in its host's namespace with its own UTS hostname, so ringx sees different
hosts and talks TCP between them over addresses that exist only inside the namespaces.

    with Hosts(["a", "b"]) as hosts:          # 10.77.0.1 (a), 10.77.0.2 (b)
        p = hosts.start("a", [python, "worker.py", ...], env)
        hosts.cut()                           # link down: a partition, no RST on either side

Creating namespaces needs root (CAP_NET_ADMIN); `why_unavailable()` says why not, for a skip.
"""

import os
import shutil
import subprocess
import uuid

SUBNET = "10.77.0"


def why_unavailable():
    if os.geteuid() != 0:
        return "needs root to create network namespaces (ip netns)"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"needs {tool} (iproute2, util-linux) to create test hosts"
    return None


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class Hosts:
    """Two hosts (the veth pair joins exactly two namespaces)."""

    def __init__(self, names):
        assert len(names) == 2, "a veth pair joins two hosts"
        tag = uuid.uuid4().hex[:6]
        self.names = list(names)
        self.netns = {name: f"rx-{tag}-{name}" for name in names}
        self.device = {name: f"rx{tag}{i}" for i, name in enumerate(names)}
        self.address = {name: f"{SUBNET}.{i + 1}" for i, name in enumerate(names)}
        self.procs = []

    def __enter__(self):
        a, b = self.names
        for name in self.names:
            _ip("netns", "add", self.netns[name])
        try:
            _ip("link", "add", self.device[a], "type", "veth", "peer", "name", self.device[b])
            for name in self.names:
                ns, dev = self.netns[name], self.device[name]
                _ip("link", "set", dev, "netns", ns)
                _ip("-n", ns, "addr", "add", f"{self.address[name]}/24", "dev", dev)
                _ip("-n", ns, "link", "set", dev, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for ns in self.netns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def start(self, name, argv, env):
        """Starts argv on host `name`: in its namespace, with hostname `host-<name>`."""
        wrapped = ["ip", "netns", "exec", self.netns[name], "unshare", "--uts", "sh", "-c",
                   f'hostname host-{name} && exec "$@"', "sh", *argv]
        p = subprocess.Popen(wrapped, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        self.procs.append(p)
        return p

    def cut(self, name=None):
        """Takes the link down (on host `name`'s side; the first host's by default): packets
        stop, no RST reaches either side."""
        name = name or self.names[0]
        _ip("-n", self.netns[name], "link", "set", self.device[name], "down")
