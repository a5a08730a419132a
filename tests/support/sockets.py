"""The sockets processes listen on, read from /proc (Linux): which addresses a server can be reached at.

``listening(pids)`` maps each process's open socket inodes (``/proc/PID/fd``) to the TCP sockets in
state LISTEN and the bound, unconnected UDP sockets of its network namespace
(``/proc/PID/net/{tcp,tcp6,udp,udp6}``). A connected UDP socket receives from its peer only: Ray
connects one to a public address, sending nothing, to learn the machine's route; it is not a server.
``exposed`` keeps those not on loopback: an IPv4-mapped ``::ffff:127.0.0.1`` is loopback, ``::`` and
``0.0.0.0`` (every interface) are not.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import NamedTuple

TCP_LISTEN = "0A"


class Listener(NamedTuple):
    pid: int
    name: str
    proto: str
    ip: str
    port: int


def _address(hex_address: str) -> tuple[str, int]:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # the kernel prints each 32-bit word in host (little-endian) order
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(raw)), int(port, 16)


def _inodes(pid: int) -> set[str]:
    found = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[8:-1])
    except OSError:  # the process ended
        pass
    return found


def listening(pids) -> list[Listener]:
    out = []
    for pid in sorted(set(pids)):
        inodes = _inodes(pid)
        if not inodes:
            continue
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        for proto in ("tcp", "tcp6", "udp", "udp6"):
            try:
                lines = Path(f"/proc/{pid}/net/{proto}").read_text().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                f = line.split()
                local, remote, state, inode = f[1], f[2], f[3], f[9]
                if inode not in inodes or (proto.startswith("tcp") and state != TCP_LISTEN):
                    continue
                if proto.startswith("udp") and _address(remote)[1] != 0:  # connected: not a server
                    continue
                ip, port = _address(local)
                out.append(Listener(pid, name, proto, ip, port))
    return out


def is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def exposed(listeners: list[Listener]) -> list[Listener]:
    return [x for x in listeners if not is_loopback(x.ip)]


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it (from /proc/*/stat's parent field)."""
    parent = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = {pid}, [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in found]
        found.update(kids)
        todo.extend(kids)
    return found
