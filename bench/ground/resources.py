"""Where the files that ship with bench live: the report templates and the claim specs.

In a checkout they are the top-level ``templates/`` and ``specs/`` folders; an installed wheel carries copies
under ``bench/_data/`` (the build step in ``setup.py`` puts them there).  The installed copy wins when both
exist, so an installed tool never reads a stray checkout.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # the bench package
DATA = PACKAGE / "_data"
CHECKOUT = PACKAGE.parent


def _shipped(name: str) -> Path | None:
    for root in (DATA, CHECKOUT):
        if (root / name).is_dir():
            return root / name
    return None


def templates_dir() -> Path:
    found = _shipped("templates")
    if found is None:  # a broken install; say so plainly rather than TemplateNotFound
        from bench.ground.errors import UsageError

        raise UsageError(f"report templates are missing from this installation (looked in {DATA} and {CHECKOUT})")
    return found


def installed_specs() -> Path | None:
    """The claim specs that came with this installation (None when it has none)."""
    return _shipped("specs")


def default_spec_paths() -> tuple[Path, ...]:
    """``./specs`` when the working folder has one, else the installed specs."""
    here = Path("specs")
    if here.is_dir():
        return (here,)
    found = installed_specs()
    if found is None:
        from bench.ground.errors import UsageError

        raise UsageError("no ./specs folder here and no specs installed with bench; pass spec files or folders")
    return (found,)


def spec_root(path: str | Path) -> Path | None:
    """The specs root (the folder whose children are family folders) that `path` lies under, if any."""
    p = Path(path).resolve()
    for parent in p.parents:
        if parent.name == "specs":
            return parent
    return None


def relative_spec_folder(folder: str | Path) -> str:
    """A folder of specs relative to its specs root (``circuits``); ``.`` when it lies under none."""
    p = Path(folder)
    root = spec_root(p / "_")  # the folder itself may be the root's child
    return p.resolve().relative_to(root).as_posix() if root is not None else "."


def relative_spec_path(path: str | Path) -> str:
    """A spec's path as ``<family>/<file>.toml`` relative to its specs root; the file name when there is none."""
    p = Path(path)
    root = spec_root(p)
    if root is None:
        return p.name
    return p.resolve().relative_to(root).as_posix()
