"""Where a command may write: never over what it reads, never inside a model folder, never half.

Every command that writes a file or a folder the user names (``--out``, ``--json``) asks here
first, before any work:

* :func:`check_output_file` — a file to write (an HTML report, a JSON table): an existing file
  only with ``--force``, never a folder, a device or a FIFO, never inside a checkpoint folder;
* :func:`check_not_source` — an output folder that is, or resolves to through links, one of the
  command's inputs, or lies inside a checkpoint folder, is refused whatever the flags;
* :func:`write_atomic` — the bytes go to a temporary file beside the target, renamed into place
  once whole: a full disk or a kill leaves the old file, never a truncated one;
* :func:`output_lock` — one run at a time writes a given ``--out``: a second one is refused in
  one line instead of replacing the first's checkpoint.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .checkpoint import is_checkpoint
from .files import CheckpointError, existing_parent
from .loader import hf_layout


def model_folder_around(path: str | Path) -> Path | None:
    """The checkpoint folder (ours or a Hugging Face model's) that ``path`` lies inside, after
    links are resolved; None when there is none. ``path`` itself being one does not count."""
    resolved = Path(path).resolve()
    for folder in resolved.parents:
        if folder.is_dir() and (is_checkpoint(folder) or (folder / "config.json").is_file() and
                                (hf_layout(folder) or (folder / "model.safetensors").exists())):
            return folder
    return None


def check_output_file(path: str | Path, force: bool = False, option: str = "--out") -> Path:
    """Raise :class:`CheckpointError` unless ``path`` may be written as one file.

    Refused: a folder, something that is not a regular file (a device such as /dev/full, a
    FIFO), an existing file without ``force``, a place inside a checkpoint folder, a parent that
    is a file.
    """
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:  # a parent that is a file, a path too long
        raise CheckpointError(f"{option} {path}: {e.strerror}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise CheckpointError(f"{option} {path} is a folder: give the file to write")
        if not stat.S_ISREG(st.st_mode):
            raise CheckpointError(f"{option} {path} is not a regular file (a device or a pipe); give a file's path")
        if not force:
            raise CheckpointError(f"{option} {path} exists; pass --force to replace it")
    folder = model_folder_around(path)
    if folder is not None:
        raise CheckpointError(f"{option} {path} lies inside the model folder {folder}; write it elsewhere")
    existing_parent(path, option)
    return path


def check_not_source(out: str | Path, sources: dict[str, str | Path | None], option: str = "--out") -> None:
    """Refuse an output folder ``out`` that is (through links too) one of ``sources`` (what the
    command reads, by option name), lies inside one, or lies inside any checkpoint folder."""
    target = Path(out).resolve()
    for name, source in sources.items():
        if source is None:
            continue
        source = Path(source).resolve()
        if target == source or source in target.parents:
            raise CheckpointError(f"{option} {out} is {name} {source}'s own folder or inside it: "
                                  "a command never writes over what it reads")
    folder = model_folder_around(out)
    if folder is not None:
        raise CheckpointError(f"{option} {out} lies inside the model folder {folder}; write it elsewhere")


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def output_lock(out: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on ``out`` for a whole run: ``.<name>.lock`` beside it, taken
    without waiting (a second run on the same ``--out`` is refused at once) and removed at the
    end. A lock file removed by the run before is told from the one now at that path by its inode."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    lock = out.parent / f".{out.name}.lock"
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise CheckpointError(f"another run is writing {out} now (it holds {lock}); wait for it to end "
                                  "or choose another --out") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the run before removed it between our open and our lock: take the new one
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)
