"""A sweep's checkpoint: a JSON-lines file of finished points, appended as each one arrives.

One header line (format, version and the sweep's identity: target, seed, config
hash, fixed overrides), then one record per finished point, each written with one
``write`` and synced, so a crash leaves at most a cut last line, which reading
drops. A checkpoint of another sweep (another identity) is refused, not mixed in.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from kernbench import atomic_output as kio
from kernbench._core import ConfigError

CHECKPOINT_FORMAT = "kernbench.sweep.checkpoint"
CHECKPOINT_VERSION = 1


class Checkpoint:
    """A JSON-lines file: one header line, then one line per finished point."""

    def __init__(self, path: Path, identity: dict[str, Any]):
        self.path = path
        self.identity = identity

    def read(self) -> dict[str, dict[str, Any]]:
        """Finished points by key; a line cut short by a crash is dropped (and cut off the file)."""
        if not self.path.exists():
            return {}
        raw = self.path.read_bytes()
        lines = raw.split(b"\n")
        good: list[bytes] = []
        records: dict[str, dict[str, Any]] = {}
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                if i == len(lines) - 1:  # the last line, half-written when the sweep died
                    break
                raise ConfigError(f"{self.path}: line {i + 1} is not JSON: the checkpoint is damaged "
                                  "(delete it, or run without resume)") from None
            if not good:
                if obj.get("format") != CHECKPOINT_FORMAT:
                    raise ConfigError(f"{self.path}: not a kernbench sweep checkpoint")
                if obj.get("identity") != self.identity:
                    theirs = obj.get("identity", {})
                    diff = [k for k in sorted(set(theirs) | set(self.identity)) if theirs.get(k) != self.identity.get(k)]
                    raise ConfigError(
                        f"{self.path}: written by a different sweep ({', '.join(diff)} differ: "
                        + "; ".join(f"{k}: checkpoint {theirs.get(k)!r}, now {self.identity.get(k)!r}" for k in diff)
                        + "); use another checkpoint or run without resume")
            else:
                records[obj["key"]] = obj
            good.append(line)
        fixed = b"\n".join(good) + (b"\n" if good else b"")
        if fixed != raw:
            kio.atomic_write_bytes(self.path, fixed)
        return records

    def start(self, keep: Iterable[dict[str, Any]]) -> None:
        """Rewrite the file: header and the records kept from before."""
        lines = [json.dumps({"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "identity": self.identity})]
        lines += [json.dumps(r) for r in keep]
        kio.atomic_write_bytes(self.path, ("\n".join(lines) + "\n").encode())

    def append(self, record: dict[str, Any]) -> None:
        data = (json.dumps(record) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, data)  # one write of one line: a crash leaves at most a cut last line
            os.fsync(fd)
        finally:
            os.close(fd)
