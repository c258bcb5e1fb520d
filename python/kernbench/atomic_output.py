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
does, for ``--out``, ``--trace``, ``--png``, ``--dir``); ``check_distinct``
refuses two outputs of one run that are the same file (``--trace OUT/sweep.json``);
``lock_output_dir`` holds ``OUT/.kernbench.lock`` so that two runs never write
into one folder, and refuses a folder inside another run's locked folder
(``check_not_inside_held`` does the same for an output file).
``write_together`` writes several files so that they land together or not at
all (sweep.json with its sweep.csv); ``set_write_guard`` installs a check run
before every write (a sweep worker: its owner still alive).
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
_ALLOWED_HELD: list[Path] = []   # locked folders this process may write inside (allow_inside_held)
_HELD_HERE: list[Path] = []      # folders this process holds locked now (lock_output_dir is re-entrant)
_WRITE_GUARD: list[Any] = []     # set_write_guard: called before every write


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
    if str(path).endswith(("/", os.sep)):  # Path() would drop the slash and write a file of that name
        raise UsageError(f"{what} {_show(path)}: ends with '/', so it names a folder, not a file (give a file name)")
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


def _same_file(a: Path, b: Path) -> bool:
    """Whether two output paths name one file: the same resolved path, or the same inode when both exist."""
    ra, rb = os.path.realpath(a), os.path.realpath(b)
    if ra == rb:
        return True
    try:
        sa, sb = os.stat(ra), os.stat(rb)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def check_distinct(outputs: Iterable[tuple[str, Path | str | None]]) -> None:
    """Refuse (UsageError) two outputs of one run that are the same file, before anything runs.

    ``outputs``: ``(what, path)`` pairs, e.g. ``("--trace", "D/sweep.json")`` and
    ``("--out's sweep.json", "D/sweep.json")``; ``None`` paths are skipped.
    """
    seen: list[tuple[str, Path]] = []
    for what, path in outputs:
        if path is None:
            continue
        p = Path(path)
        for other, q in seen:
            if _same_file(p, q):
                raise UsageError(f"{what} {_show(path)}: the same path as {other} ({_show(q)}); one would "
                                 "overwrite the other (give another name)")
        seen.append((what, p))


def lock_holder(folder: Path | str) -> str | None:
    """The pid (as written in the lock file) of the run that holds ``FOLDER/.kernbench.lock`` now; None when no run
    holds it (or the folder has no lock file)."""
    import fcntl

    lock = Path(folder) / LOCK_NAME
    try:
        fd = os.open(lock, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
            try:
                return os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            except OSError:
                return "?"
        return None  # got it: nobody holds it (closing the fd releases it)
    finally:
        os.close(fd)


@contextlib.contextmanager
def allow_inside_held(folder: Path | str | None) -> Iterator[None]:
    """Within the block, outputs inside ``folder`` are allowed although a run holds its lock: that run is ours
    (a sweep's points write under the sweep's locked folder)."""
    if folder is None:
        yield
        return
    real = Path(os.path.realpath(folder))
    _ALLOWED_HELD.append(real)
    try:
        yield
    finally:
        _ALLOWED_HELD.remove(real)


def check_not_inside_held(path: Path | str | None, what: str = "output") -> None:
    """Refuse (UsageError) an output inside a folder another kernbench run holds locked (e.g. ``--out
    SWEEP/points/p0000`` while that sweep runs): it would overwrite that run's files."""
    if path is None:
        return
    real = Path(os.path.realpath(path))
    for folder in real.parents:
        if any(folder == a or a in folder.parents for a in _ALLOWED_HELD):
            return  # our own run's folder, and above it
        holder = lock_holder(folder)
        if holder is not None:
            raise UsageError(f"{what} {_show(path)}: inside {_show(folder)}, which another kernbench run (pid "
                             f"{holder}) is writing into; wait for it or choose a folder outside it")


@contextlib.contextmanager
def lock_output_dir(path: Path | str, what: str = "--out") -> Iterator[Path]:
    """Hold ``PATH/.kernbench.lock`` (an exclusive ``flock``) for the block; another holder is a UsageError.

    The folder is made if missing. The lock file stays (removing it would race with the next run);
    the lock goes with the process, so a killed run never leaves the folder locked. A folder inside
    one another run holds (``check_not_inside_held``) is refused too. Re-entrant: a folder this process holds
    already is entered without a second lock (a command holds its --out for the whole run, and the writer it
    calls takes the same lock).
    """
    import fcntl

    folder = Path(path)
    real = Path(os.path.realpath(folder))
    if real in _HELD_HERE:  # this process holds it already (a command's lock, then the writer's own): go on
        yield folder
        return
    check_not_inside_held(folder, what)  # the folder itself: the flock below
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
        _HELD_HERE.append(real)
        _ALLOWED_HELD.append(real)  # our own outputs inside it (a bench's points/ folders) are ours
        try:
            yield folder
        finally:
            _HELD_HERE.remove(real)
            _ALLOWED_HELD.remove(real)
    finally:
        os.close(fd)  # closing releases the lock


def hold_output_dir(path: Path | str | None, what: str = "--out"):
    """``lock_output_dir(path)`` for a command's whole run (None: no folder, nothing held): every command that
    writes a folder holds it so, and a second command into the same folder is refused, not overwritten."""
    return lock_output_dir(path, what) if path is not None else contextlib.nullcontext(None)


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


def set_write_guard(guard: Any) -> None:
    """Call ``guard()`` before every write of this process from now on (None: no guard). A sweep worker installs
    one that ends the worker when its owner is gone, so no file is written for a sweep nobody runs any more."""
    _WRITE_GUARD[:] = [guard] if guard is not None else []


def _guard() -> None:
    for g in _WRITE_GUARD:
        g()


def _stage(path: Path, data: bytes) -> tuple[Path, str | None]:
    """Write ``data`` beside ``path`` (by the module doc's rules): (the target, its synced temporary file), or
    (the device, None) for a character device, which is written through at once."""
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
            _guard()
            _write_through(target, data)
            return target, None
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
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target, tmp


def write_together(files: Mapping[Path | str, bytes]) -> None:
    """Write several files so that they land together or not at all: every one is staged (written and synced
    beside its target) first, and only then are they renamed into place, in the order given (put the index,
    e.g. sweep.json, last). A failure while staging replaces nothing."""
    staged: list[tuple[Path, str | None]] = []
    try:
        for path, data in files.items():
            staged.append(_stage(Path(path), data))
        _guard()
        for target, tmp in staged:
            if tmp is not None:
                os.replace(tmp, target)
    finally:
        for _, tmp in staged:
            if tmp is not None and os.path.lexists(tmp):
                Path(tmp).unlink(missing_ok=True)


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` by the rules of the module doc; returns ``path``."""
    path = Path(path)
    write_together({path: data})
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


def json_bytes(obj: Any) -> bytes:
    """``obj`` as the indented JSON text ``write_json`` writes (ValueError for a non-finite number)."""
    return (json.dumps(to_jsonable(obj), indent=2, sort_keys=False, allow_nan=False) + "\n").encode()


def write_json(path: Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON, atomically."""
    return atomic_write_bytes(Path(path), json_bytes(obj))


def write_csv(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    """Write rows (dicts) as CSV with the union of their keys as header, atomically."""
    return atomic_write_bytes(Path(path), csv_bytes(rows))


def csv_bytes(rows: Iterable[Mapping[str, Any]]) -> bytes:
    """Rows (dicts) as the CSV text ``write_csv`` writes: the union of their keys as header."""
    rows = list(rows)
    header: list[str] = []
    for r in rows:
        header.extend(k for k in r if k not in header)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in header})
    return buf.getvalue().encode()


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
