"""Atomic output: a file is either its old self or complete, never half-written.

Every file kernbench writes (sweep.json, CSVs, figures, traces, goldens,
checkpoints) goes through here. What happens depends on what the target is:

- a new name or an existing **regular file**: written to a temporary file in
  the same folder, flushed, synced, then renamed over the target. A new file
  gets mode ``0666 & ~umask`` (like any normal write); a file that existed
  keeps its mode.
- a **symlink**: the link is followed and its resolved target is written as
  above; the link itself stays a link.
- a **character device** (``/dev/null``, a terminal): written through (opened
  and written in place), never replaced: ``--trace /dev/null`` discards the
  trace and /dev/null stays a device.
- anything else (a folder, a FIFO, a socket, a block device): refused with
  a UsageError naming the path; nothing is replaced.

``check_output_file`` and ``check_output_dir`` apply the same rules up front,
so a command can refuse a bad output path before it runs anything (the CLI
does, for ``--out``, ``--trace``, ``--png``, ``--dir``); ``lock_output_dir``
holds ``OUT/.kernbench.lock`` so that two runs never write into one folder.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import math
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from kernbench._core import UsageError

LOCK_NAME = ".kernbench.lock"


def _umask() -> int:
    """The process umask, read without changing it where the OS allows (Linux: /proc/self/status)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def _nearest_existing(path: Path) -> Path:
    p = path
    while not os.path.lexists(p):
        if p.parent == p:
            break
        p = p.parent
    return p


def _check_parents(path: Path, what: str, shown: Path | str | None = None) -> None:
    """Every missing folder on the way to ``path`` can be made: the nearest existing one is a writable folder,
    and no name is too long."""
    shown = path if shown is None else shown
    base = _nearest_existing(path.parent)
    limit = _name_max(base if base.is_dir() else Path("/"))
    for part in path.parts:
        if len(os.fsencode(part)) > limit:
            raise UsageError(f"{what} {_show(shown)}: the name {part[:40]!r}... is {len(os.fsencode(part))} bytes "
                             f"long (at most {limit})")
    if not base.is_dir():
        kind = _kind(base)
        raise UsageError(f"{what} {_show(shown)}: {_show(base)} is {kind}, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {_show(shown)}: the folder {_show(base)} is not writable")


def _show(path: Path | str) -> str:
    s = str(path)
    return s if len(s) <= 80 else s[:60] + "..." + s[-12:]


def _kind(path: Path) -> str:
    try:
        m = os.stat(path).st_mode
    except OSError:
        return "missing"
    if stat.S_ISDIR(m):
        return "a folder"
    if stat.S_ISREG(m):
        return "a file"
    if stat.S_ISCHR(m):
        return "a character device"
    if stat.S_ISBLK(m):
        return "a block device"
    if stat.S_ISFIFO(m):
        return "a FIFO"
    if stat.S_ISSOCK(m):
        return "a socket"
    return "not a regular file"


def check_output_file(path: Path | str | None, what: str = "output") -> Path | None:
    """Refuse (UsageError) an output file path kernbench could not write, before anything runs.

    Fine: a new name in a folder that exists or can be made, a regular file, a symlink to one of
    those, a character device (written through). Refused: an empty path, a folder, any other kind of
    file, a path under a file, a name longer than the file system allows, an unwritable folder.
    """
    if path is None:
        return None
    if str(path).strip() == "":
        raise UsageError(f"{what}: empty path (give a file name)")
    p = Path(path)
    if os.path.lexists(p):
        real = Path(os.path.realpath(p))
        if not real.exists():
            _check_parents(real, what, path)
            return p
        m = os.stat(real).st_mode
        if stat.S_ISREG(m):
            if not os.access(real, os.W_OK):
                raise UsageError(f"{what} {_show(path)}: the file is not writable")
            _check_parents(real, what, path)
            return p
        if stat.S_ISCHR(m):
            return p
        raise UsageError(f"{what} {_show(path)}: is {_kind(real)}, not a file (give a file name)")
    _check_parents(Path(os.path.abspath(p)), what, path)
    return p


def check_output_dir(path: Path | str | None, what: str = "--out") -> Path | None:
    """Refuse (UsageError) an output folder kernbench could not write, before anything runs.

    Fine: an existing writable folder (or a symlink to one), or a new name whose nearest existing
    parent is a writable folder. Refused: an empty path (it would write into the current folder), a
    file, a device, a path under a file, a name longer than the file system allows.
    """
    if path is None:
        return None
    if str(path).strip() == "":
        raise UsageError(f"{what}: empty path (it would write into the current folder; give a folder, "
                         "e.g. --out .)" if what == "--out" else f"{what}: empty path (give a folder)")
    p = Path(path)
    if os.path.lexists(p):
        real = Path(os.path.realpath(p))
        if real.is_dir():
            if not os.access(real, os.W_OK | os.X_OK):
                raise UsageError(f"{what} {_show(path)}: the folder is not writable")
            return p
        if not real.exists():
            _check_parents(real / "x", what, path)
            return p
        raise UsageError(f"{what} {_show(path)}: is {_kind(real)}, not a folder")
    _check_parents(Path(os.path.abspath(p)) / "x", what, path)
    return p


@contextlib.contextmanager
def lock_output_dir(path: Path | str, what: str = "--out") -> Iterator[Path]:
    """Hold ``PATH/.kernbench.lock`` (an exclusive ``flock``) for the block; another holder is a UsageError.

    The folder is made if missing. The lock file stays (removing it would race with the next run);
    the lock goes with the process, so a killed run never leaves the folder locked.
    """
    import fcntl

    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_NAME
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            try:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            except OSError:
                holder = "?"
            raise UsageError(f"{what} {_show(path)}: another kernbench run (pid {holder}) is writing into this "
                             f"folder; wait for it or choose another folder") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield folder
    finally:
        os.close(fd)  # closing releases the lock


def _write_through(path: Path, data: bytes) -> Path:
    fd = os.open(path, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    finally:
        os.close(fd)
    return path


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` by the rules of the module doc; returns ``path``."""
    path = Path(path)
    if str(path).strip() == "":
        raise UsageError("output: empty path (give a file name)")
    target = Path(os.path.realpath(path)) if os.path.islink(path) else path
    mode = None
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise UsageError(f"output {_show(path)}: a part of the path is a file, not a folder") from None
    if st is not None:
        if stat.S_ISCHR(st.st_mode):
            _write_through(target, data)
            return path
        if not stat.S_ISREG(st.st_mode):
            raise UsageError(f"output {_show(path)}: is {_kind(target)}, not a file; not replaced")
        mode = stat.S_IMODE(st.st_mode)
    if mode is None:
        mode = 0o666 & ~_umask()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(f"output {_show(path)}: a part of the folder is a file, not a folder") from None
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:200]}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


_atomic_write_bytes = atomic_write_bytes  # the old private name, still used (benches/validation.py)


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types; numpy scalars and arrays converted; NaN/inf refused by name."""
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return to_jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError(f"refusing to write a non-finite number ({obj}) to JSON; use None for 'no value'")
    return obj


def write_json(path: Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON, atomically."""
    text = json.dumps(to_jsonable(obj), indent=2, sort_keys=False, allow_nan=False) + "\n"
    return atomic_write_bytes(Path(path), text.encode())


def write_csv(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write rows (dicts) as CSV with the union of their keys as header, atomically."""
    rows = list(rows)
    header: list[str] = []
    for r in rows:
        header.extend(k for k in r if k not in header)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in header})
    return atomic_write_bytes(Path(path), buf.getvalue().encode())


def figure_formats() -> list[str]:
    """The file formats matplotlib can save figures as (png, pdf, svg, ...)."""
    from matplotlib.backend_bases import FigureCanvasBase

    return sorted(FigureCanvasBase.get_supported_filetypes())


def check_figure_file(path: Path | str | None, what: str = "--png") -> Path | None:
    """``check_output_file`` plus a format matplotlib knows (from the suffix; none: PNG)."""
    p = check_output_file(path, what)
    if p is None:
        return None
    fmt = p.suffix.lstrip(".").lower()
    if fmt and fmt not in figure_formats():
        raise UsageError(f"{what} {_show(path)}: unknown figure format {fmt!r} "
                         f"(known: {', '.join(figure_formats())})")
    return p


def save_figure(fig: Any, path: Path, dpi: int = 120) -> Path:
    """Save a matplotlib figure atomically (rendered to memory first); the suffix names the format."""
    check_figure_file(path, "figure")
    buf = io.BytesIO()
    fig.savefig(buf, format=Path(path).suffix.lstrip(".").lower() or "png", dpi=dpi, bbox_inches="tight")
    return atomic_write_bytes(Path(path), buf.getvalue())
