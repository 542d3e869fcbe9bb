"""Deterministic values (ids, suffixes, offsets) and the time formats logs print.

Every value comes from a SHA-256 of fixed keys, so two runs write the same bytes.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

NS = 1_000_000_000


K8S_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.String


LOWER_ALNUM = "abcdefghijklmnopqrstuvwxyz0123456789"


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()


def rand_int(lo: int, hi: int, *parts: object) -> int:
    """An integer in [lo, hi) derived from ``parts``."""
    return lo + int.from_bytes(_digest(*parts)[:8], "big") % (hi - lo)


def rand_str(alphabet: str, n: int, *parts: object) -> str:
    out: list[str] = []
    block = _digest(*parts)
    while len(out) < n:
        for byte in block:
            out.append(alphabet[byte % len(alphabet)])
            if len(out) == n:
                break
        block = _digest(block.hex())
    return "".join(out)


def rand_hex(n: int, *parts: object) -> str:
    text = ""
    block = _digest(*parts)
    while len(text) < n:
        text += block.hex()
        block = _digest(block.hex())
    return text[:n]


def rand_uuid(*parts: object) -> str:
    h = rand_hex(32, "uuid", *parts)
    variant = "89ab"[int(h[16], 16) % 4]
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{variant}{h[17:20]}-{h[20:32]}"


def rand_float(lo: float, hi: float, *parts: object) -> float:
    return lo + (hi - lo) * (rand_int(0, 1_000_000, *parts) / 1_000_000)


def parse_time(text: str) -> int:
    """RFC 3339 (whole seconds, Z) to integer nanoseconds since the epoch."""
    moment = datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return int(moment.timestamp()) * NS


def fmt_ts(ns: int, digits: int = 9) -> str:
    """RFC 3339 UTC with ``digits`` fractional digits (0 = whole seconds)."""
    sec, frac = divmod(ns, NS)
    base = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if digits == 0:
        return base + "Z"
    return f"{base}.{frac:09d}"[: len(base) + 1 + digits] + "Z"


def dt(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // NS, UTC)


def syslog_stamp(ns: int) -> str:
    d = dt(ns)
    return f"{d:%b} {d.day:>2} {d:%H:%M:%S}"


def glog_prefix(level: str, ns: int, tid: int, where: str) -> str:
    d = dt(ns)
    usec = (ns % NS) // 1000
    return f"{level}{d:%m%d} {d:%H:%M:%S}.{usec:06d} {tid:>7d} {where}]"


def c10_prefix(rank: int, level: str, ns: int, where: str) -> str:
    d = dt(ns)
    return f"[rank{rank}]:[{level}{d:%m%d} {d:%H:%M:%S}.{ns % NS:09d} {where}]"


def py_stamp(ns: int) -> str:
    d = dt(ns)
    return f"{d:%Y-%m-%d %H:%M:%S},{(ns % NS) // 1_000_000:03d}"


def elastic_prefix(level: str, ns: int, pid: int, where: str) -> str:
    """torch.distributed.elastic's log prefix from PyTorch 2.4 on (milliseconds, then 000)."""
    d = dt(ns)
    return f"{level}{d:%m%d} {d:%H:%M:%S}.{(ns % NS) // 1_000_000:03d}000 {pid} {where}]"
