"""A sweep's checkpoint: a JSON-lines file of finished points, appended as each one arrives.

One header line (format, version and the sweep's identity: target, seed, config
hash, fixed overrides), then one record per finished point, each written with one
``write`` and synced, so a crash leaves at most a cut last line, which reading
drops. A checkpoint of another sweep (another identity) is refused, not mixed in, and so is any other
damage (a missing or foreign header, a file of blank lines only, a line that is not a point's record, a key
given twice in a line, a value nested deeper than ``MAX_DEPTH``, garbage bytes): a ConfigError naming the file
and the line; the file is then left untouched. A 0-byte file is no checkpoint (nothing is lost).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Iterable

from kernbench import atomic_output as kio
from kernbench._core import ConfigError

CHECKPOINT_FORMAT = "kernbench.sweep.checkpoint"
CHECKPOINT_VERSION = 1
STATUSES = ("ok", "partial", "failed")
# The fields of a point's record and their JSON types (a NaN metric in ``rows`` is kept: sweep.json writes null).
RECORD_FIELDS: dict[str, Any] = {"key": str, "point": int, "params": dict, "status": str, "error": str,
                                 "rows": list, "wall_s": (int, float)}
RECORD_TYPES = {"key": "a string", "point": "an integer", "params": "a map", "status": "a string",
                "error": "a string", "rows": "a list", "wall_s": "a number"}
#: Deepest nesting of maps and lists a line may hold (a point's record is 4 deep; a deeper one made the resumed
#: sweep die by RecursionError).
MAX_DEPTH = 100


class _KeyTwice(ValueError):
    """A JSON object giving one key twice (``json`` would keep the last)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _KeyTwice(k)
        out[k] = v
    return out


def _too_deep(obj: Any) -> bool:
    """Whether ``obj`` nests maps and lists deeper than MAX_DEPTH (iterative: no recursion)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > MAX_DEPTH:
                return True
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))
    return False


def _short(v: Any) -> str:
    text = json.dumps(v) if isinstance(v, (int, float, str, bool, type(None))) else type(v).__name__
    return text if len(text) <= 40 else text[:37] + "..."


class Checkpoint:
    """A JSON-lines file: one header line, then one line per finished point."""

    def __init__(self, path: Path, identity: dict[str, Any]):
        self.path = path
        self.identity = identity

    def _damaged(self, line: int, why: str) -> ConfigError:
        return ConfigError(f"{self.path}: line {line} {why}: the checkpoint is damaged (delete it, or run without "
                           "--resume)")

    def read(self) -> dict[str, dict[str, Any]]:
        """Finished points by key; a line cut short by a crash is dropped (and cut off the file).

        Only the last line may be cut short (no newline after it, the start of a record: a crash in the middle
        of its one write); any other damage (the header missing or not ours, a line that is not a record, a
        file that is only garbage bytes) is a ConfigError naming the file and the line, and the file is left
        as it is.
        """
        if not self.path.exists():
            return {}
        try:
            raw = self.path.read_bytes()
        except OSError as e:
            raise ConfigError(f"{self.path}: cannot read the checkpoint: {e.strerror or e}") from None
        lines = raw.split(b"\n")
        good: list[bytes] = []
        records: dict[str, dict[str, Any]] = {}
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                obj = json.loads(line, object_pairs_hook=_no_duplicates)
            except _KeyTwice as e:
                raise self._damaged(i + 1, f"gives the key {_short(e.args[0])} twice") from None
            except (ValueError, RecursionError):
                # the last line, half-written when the sweep died: after the header, no newline, a record's start
                if i == len(lines) - 1 and good and line.startswith(b'{"'):
                    break
                if not good:
                    raise ConfigError(f"{self.path}: not a kernbench sweep checkpoint (line {i + 1} is not JSON); "
                                      "delete it, or run without --resume") from None
                raise self._damaged(i + 1, "is not JSON") from None
            if _too_deep(obj):
                raise self._damaged(i + 1, f"is nested deeper than {MAX_DEPTH} levels")
            if not good:
                self._check_header(obj, i + 1)
            else:
                records[self._check_record(obj, i + 1)] = obj
            good.append(line)
        if raw and not good:  # only blank lines: no header, and nothing kernbench wrote
            raise ConfigError(f"{self.path}: not a kernbench sweep checkpoint (only blank lines, no header); "
                              "delete it, or run without --resume")
        fixed = b"\n".join(good) + (b"\n" if good else b"")
        if fixed != raw:
            kio.atomic_write_bytes(self.path, fixed)
        return records

    def _check_header(self, obj: Any, line: int) -> None:
        if not isinstance(obj, dict) or obj.get("format") != CHECKPOINT_FORMAT:
            raise ConfigError(f"{self.path}: not a kernbench sweep checkpoint (line {line} is not its header); "
                              "delete it, or run without --resume")
        version = obj.get("version")
        if type(version) is not int or version != CHECKPOINT_VERSION:  # not true or 1.0, which equal 1
            raise ConfigError(f"{self.path}: checkpoint version {version!r}, this kernbench reads version "
                              f"{CHECKPOINT_VERSION}; run without --resume")
        theirs = obj.get("identity")
        if not isinstance(theirs, dict):
            raise self._damaged(line, "has no sweep identity")
        if theirs != self.identity:
            diff = [k for k in sorted(set(theirs) | set(self.identity)) if theirs.get(k) != self.identity.get(k)]
            raise ConfigError(
                f"{self.path}: written by a different sweep ({', '.join(diff)} differ: "
                + "; ".join(f"{k}: checkpoint {theirs.get(k)!r}, now {self.identity.get(k)!r}" for k in diff)
                + "); use another checkpoint or run without resume")

    def _check_record(self, obj: Any, line: int) -> str:
        """A point's record as ``kernbench.sweeps`` writes it, or the line is damaged; returns its key."""
        if not isinstance(obj, dict):
            raise self._damaged(line, f"is {type(obj).__name__}, not a point's record")
        for name, types in RECORD_FIELDS.items():
            if name not in obj:
                raise self._damaged(line, f"lacks {name!r}")
            v = obj[name]
            if not isinstance(v, types) or isinstance(v, bool):
                raise self._damaged(line, f"has {name}={_short(v)}, expected {RECORD_TYPES[name]}")
        if obj["status"] not in STATUSES:
            raise self._damaged(line, f"has status={_short(obj['status'])}, expected one of {', '.join(STATUSES)}")
        if not all(isinstance(r, dict) for r in obj["rows"]):
            raise self._damaged(line, "has rows that are not all maps of metrics")
        try:
            seconds = float(obj["wall_s"])  # an integer of 400 digits: OverflowError
        except OverflowError:
            seconds = math.inf
        if not (math.isfinite(seconds) and seconds >= 0):
            w = obj["wall_s"]
            shown = repr(w) if isinstance(w, float) else _short(w)  # nan, inf as Python writes them
            raise self._damaged(line, f"has wall_s={shown}, expected seconds >= 0")
        if obj["point"] < 0:
            raise self._damaged(line, f"has point={obj['point']}, expected an index >= 0")
        return obj["key"]

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
