"""Local copies of datasets whose texts are not shipped: which paths a visitor may point the app at.

The operator lists the folders a copy may lie under (:data:`DATA_ROOTS_ENV`); a typed path is
checked against them before anything is read, and again after symbolic links are followed.
Links name a copy by its place under those folders (:func:`copy_name`), never by a path of this
machine. The operator lists the analysis folders of ``budgetformer analyze`` the same way
(:data:`ANALYSIS_DIRS_ENV`, :func:`analysis_folders`); a visitor picks one by its name only.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The project folder: relative paths start here, and ../shared/data is the default root."""

DATA_ROOTS_ENV = "BUDGETFORMER_DATA_DIRS"
"""Environment variable the operator sets before starting the app: the folders (separated by
``os.pathsep``) under which a visitor's local copy may lie. Default: the project's ../shared/data."""

LOCAL_COPY_HELP = (
    "A folder in the dataset's published layout, or one CSV / JSONL / Parquet file with text and label "
    "columns (all its rows are the test split), under ../shared/data or a folder the operator listed in "
    f"${DATA_ROOTS_ENV}; other paths are not read. The texts are not shipped; the precomputed results are."
)


def allowed_data_roots(resolve: bool = True) -> list[Path]:
    """The folders a local copy may lie under: ``$BUDGETFORMER_DATA_DIRS`` or ../shared/data
    (resolved; ``resolve=False``: as listed, made absolute)."""
    listed = os.environ.get(DATA_ROOTS_ENV)
    roots = [ROOT.parent / "shared" / "data"] if listed is None else [p for p in listed.split(os.pathsep) if p.strip()]
    return [Path(os.path.abspath(r)).resolve() if resolve else Path(os.path.abspath(r)) for r in roots]


def local_copy(value: str | None) -> Path | None:
    """The path a visitor typed, resolved, when it lies under :func:`allowed_data_roots`; else None.

    The typed text is checked before anything is read (``..`` cannot climb out), and again after
    symbolic links are followed (a link cannot point out). Relative paths start at the project.
    """
    if not value or "\0" in value:
        return None
    roots = allowed_data_roots()
    inside = lambda p, rs=roots: any(p == r or p.is_relative_to(r) for r in rs)  # noqa: E731
    typed = Path(os.path.normpath(ROOT / value))  # ROOT / an absolute path is that path
    if not inside(typed, roots + allowed_data_roots(resolve=False)):  # a listed folder may be a link
        return None
    try:
        path = typed.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return path if inside(path) and (path.is_dir() or path.is_file()) else None


def copy_name(path: str | None) -> str | None:
    """The name a link gives a local copy: its place under the operator's folder that holds it
    (``ag_news``, ``ag_news/test.csv``), never a path of this machine; None when it lies under none."""
    copy = local_copy(path)
    for root in allowed_data_roots() if copy is not None else []:
        if copy != root and copy.is_relative_to(root):
            return copy.relative_to(root).as_posix()
    return None


def named_copy(name: str | None) -> str | None:
    """The local copy a link names (:func:`copy_name`), as a path under the first of the operator's
    folders that holds it; None for a name that is absolute, climbs (``..``) or is under none."""
    if not name or "\0" in name or name.startswith(("/", "\\", "~")) or ".." in name.replace("\\", "/").split("/"):
        return None
    for root in allowed_data_roots(resolve=False):
        if local_copy(str(root / name)) is not None:
            return str(root / name)
    return None


ANALYSIS_DIRS_ENV = "BUDGETFORMER_ANALYSIS_DIRS"
"""Environment variable the operator sets before starting the app: folders (separated by
``os.pathsep``) that are analysis folders of ``budgetformer analyze`` (a ``summary.json`` in them)
or hold such folders directly inside. Default: none. A visitor never names a folder."""


def analysis_folders() -> dict[str, Path]:
    """The complete analysis folders (``summary.json`` written) the operator listed in
    :data:`ANALYSIS_DIRS_ENV`, by their folder's name (the first listed keeps a name two share)."""
    found: dict[str, Path] = {}
    listed = [p for p in os.environ.get(ANALYSIS_DIRS_ENV, "").split(os.pathsep) if p.strip()]
    for root in (Path(os.path.abspath(p)) for p in listed):
        try:
            folders = [root, *sorted(p for p in root.iterdir() if p.is_dir())] if root.is_dir() else []
        except OSError:  # an unreadable folder offers nothing
            folders = []
        for folder in folders:
            if (folder / "summary.json").is_file():
                found.setdefault(folder.name, folder)
    return found
