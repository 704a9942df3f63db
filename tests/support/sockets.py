"""Which TCP addresses a tree of processes listens on, read from /proc (no `ss` or `netstat` needed)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

from spark_apps.services.processes import process_table

LISTEN = "0A"


def process_tree(root: int) -> set[int]:
    """``root`` and every live process descending from it."""
    parents = {pid: ppid for pid, (ppid, _, _) in process_table().items()}
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return tree


def listening_addresses(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of every listening TCP socket the processes hold, IPv4 and IPv6."""
    inodes = set()
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        inodes.update(int(link[8:-1]) for link in links if link.startswith("socket:["))
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN and int(fields[9]) in inodes:
                address, port = fields[1].split(":")
                found.add((str(_address(address)), int(port, 16)))
    return found


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp* write addresses as host-order 32-bit words in hex."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)
