"""The input side of spec loading, made total: safe file reading, TOML limits, line lookup, profile checks.

Everything here either returns a value or raises :class:`SpecError` with one line for the user; no input
(deep nesting, huge files, FIFOs, devices, symlink loops, binary, very long lines) may raise anything else or
take more than linear time.
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Iterable, Mapping

import tomllib

from bench.ground.errors import SpecError, did_you_mean

MAX_BYTES = 64 << 10  # a spec is a page of TOML (the largest shipped one is under 5 KiB); parsing stays fast
MAX_DEPTH = 24  # tables and arrays nested deeper than this are refused (the shipped specs use 4)
MAX_NAME = 255  # a file or folder name longer than this is refused before the system is asked
PROFILES = ("smoke", "full")  # the profiles a spec may define (see DESIGN.md, Profiles)


# ── reading ────────────────────────────────────────────────────────────────────────────────────────────────

def read_text(path: Path) -> str:
    """The text of a regular spec file; FIFOs, devices, sockets, folders, loops and huge files are refused."""
    _check_name(path)
    try:
        st = os.stat(path)  # follows symlinks; a loop raises ELOOP
    except FileNotFoundError:
        raise SpecError("file not found", path=str(path)) from None
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", path=str(path)) from None
    if not stat.S_ISREG(st.st_mode):
        raise SpecError(f"not a regular file ({_kind(st.st_mode)}); only plain .toml files are read", path=str(path))
    if st.st_size > MAX_BYTES:
        raise SpecError(f"file is {st.st_size} bytes; a spec may be at most {MAX_BYTES} bytes", path=str(path))
    try:  # O_NONBLOCK: should the file be swapped for a FIFO after the stat, opening it still cannot hang
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise SpecError("not a regular file; only plain .toml files are read", path=str(path))
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read: {exc.strerror or exc}", path=str(path)) from None
    if len(data) > MAX_BYTES:
        raise SpecError(f"file is over {MAX_BYTES} bytes", path=str(path))
    if b"\x00" in data:
        raise SpecError("binary content (NUL bytes); a spec is UTF-8 text", path=str(path))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(f"not UTF-8 text (byte {exc.start})", path=str(path)) from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a plain file"


def _check_name(path: Path) -> None:
    text = str(path)
    if "\x00" in text:
        raise SpecError("path contains a NUL byte", path=repr(text)[:80])
    long = next((part for part in Path(text).parts if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME), None)
    if long is not None:
        raise SpecError(f"a name in this path is {len(long)} characters long (the limit is {MAX_NAME})",
                        path=text[:80] + "…")


def model_name_problem(name: str) -> str | None:
    """Why `name` cannot name a model (alias, path or hub id), or None."""
    if any(ord(c) < 32 or c == "\x7f" for c in name):
        return "contains control characters"
    if len(name) > 4096:
        return f"is {len(name)} characters long (the limit is 4096)"
    if any(len(part.encode("utf-8", "surrogateescape")) > MAX_NAME for part in name.split("/")):
        return f"has a part longer than {MAX_NAME} bytes"
    return None


def discover(paths: Iterable[str | Path]) -> list[Path]:
    """All ``*.toml`` files under the given files or folders, sorted, each once; loops and dangling links refused."""
    found: list[Path] = []
    for p in paths:
        p = Path(p)
        _check_name(p)
        try:
            st = os.stat(p)
        except FileNotFoundError:
            hint = "" if p.suffix == ".toml" else (" (if this is a model, name each model with its own --models: "
                                                   "--models A --models B)")
            raise SpecError("no such file or folder" + hint, path=str(p)) from None
        except OSError as exc:
            raise SpecError(f"cannot read: {exc.strerror or exc}", path=str(p)) from None
        if stat.S_ISDIR(st.st_mode):
            found.extend(_walk(p))
        else:
            found.append(p)  # read_text refuses what is not a regular file, with its reason
    unique = list(dict.fromkeys(_resolve(f) for f in found))
    return [Path(f) for f in unique]


def _walk(root: Path) -> list[Path]:
    """``*.toml`` under `root`, following links to folders once each (a loop is an error, not a hang)."""
    out: list[Path] = []
    seen: set[tuple[int, int]] = set()
    stack: list[tuple[Path, frozenset]] = [(root, frozenset())]
    while stack:
        d, above = stack.pop()
        try:
            st = os.stat(d)
            ident = (st.st_dev, st.st_ino)
            if ident in above:
                raise SpecError("symlink loop: this folder links back to a folder that holds it", path=str(d))
            entries = [] if ident in seen else sorted(os.scandir(d), key=lambda e: e.name)
            seen.add(ident)
        except SpecError:
            raise
        except OSError as exc:
            raise SpecError(f"cannot read folder: {exc.strerror or exc}", path=str(d)) from None
        for e in entries:
            path = Path(e.path)
            try:
                is_dir = e.is_dir()
            except OSError as exc:
                raise SpecError(f"cannot read: {exc.strerror or exc}", path=str(path)) from None
            if is_dir:
                stack.append((path, above | {ident}))
            elif e.name.endswith(".toml"):
                if e.is_symlink() and not path.exists():
                    raise SpecError("dangling or looping symlink", path=str(path))
                out.append(path)
    return sorted(out)


def _resolve(path: Path) -> Path:
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop on older Pythons
        raise SpecError(f"cannot resolve: {exc}", path=str(path)) from None


# ── parsing with limits ────────────────────────────────────────────────────────────────────────────────────

def parse(text: str, path: Path) -> dict:
    depth = _bracket_depth(text)
    if depth > MAX_DEPTH:
        raise SpecError(f"tables, arrays or dotted keys nested {depth} deep; the limit is {MAX_DEPTH}", path=str(path))
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        line = getattr(exc, "lineno", None) or (int(m.group(1)) if m else None)
        msg = getattr(exc, "msg", None) or re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise SpecError(f"malformed TOML: {msg}", path=str(path), line=line) from None
    except (RecursionError, MemoryError):
        raise SpecError(f"TOML nested too deeply (the limit is {MAX_DEPTH})", path=str(path)) from None
    check_values(raw, path)
    return raw


def _bracket_depth(text: str) -> int:
    """Deepest nesting outside strings and comments, in one pass: brackets and braces, and the parts of a
    dotted key (``a.b.c = 1`` nests as deep as ``a = {b = {c = 1}}``; tables by header don't nest)."""
    depth = deepest = dots = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth + dots)
            dots = 0
        elif c in "]}":
            depth = max(0, depth - 1)
        elif c == ".":
            dots += 1
            deepest = max(deepest, depth + dots)
        elif c in "\n=,":
            dots = 0
        elif c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif c in "\"'":
            q3 = text.startswith(c * 3, i)
            end = c * 3 if q3 else c
            j = i + len(end)
            while j < n:
                if c == '"' and text[j] == "\\":
                    j += 2
                    continue
                if text.startswith(end, j) or (not q3 and text[j] == "\n"):
                    break
                j += 1
            i = j + len(end)
            continue
        i += 1
    return deepest


def check_values(raw: Any, path: Path) -> None:
    """Depth of the parsed tree (dotted keys nest without brackets) and finite numbers, without recursion."""
    stack: list[tuple[Any, int, str]] = [(raw, 0, "")]
    while stack:
        value, depth, where = stack.pop()
        if depth > MAX_DEPTH:
            raise SpecError(f"tables or arrays nested more than {MAX_DEPTH} deep", path=str(path),
                            key=where.strip(".")[:120] or None)
        if isinstance(value, dict):
            for k, v in value.items():
                if len(k) > MAX_NAME:
                    raise SpecError(f"a key is {len(k)} characters long (the limit is {MAX_NAME})", path=str(path))
                stack.append((v, depth + 1, f"{where}.{k}"))
        elif isinstance(value, list):
            stack.extend((v, depth + 1, f"{where}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, float) and not math.isfinite(value):
            raise SpecError(f"{value} is not allowed: numbers must be finite", path=str(path),
                            key=where.strip(".")[:120] or None)


# ── line lookup, linear in the size of the text ─────────────────────────────────────────────────────────────

_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.\"' \t")


def find_line(text: str, table: str, key: str) -> int | None:
    """Line (1-based) where `key` is assigned inside `[table]` (or as `table.key = …` at top level)."""
    if not text:
        return None
    current, header_line = "", None
    want = f"{table}.{key}" if table else key
    for n, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if s.startswith("["):
            name = _header(s)
            if name is not None:
                current = name
                if table and name == table and header_line is None:
                    header_line = n
                continue
        name = _assigned(s)
        if name is None:
            continue
        full = f"{current}.{name}" if current else name
        if full == want or (not table and full.endswith("." + key)) or (current == table and name == key):
            return n
    return header_line


def _header(s: str) -> str | None:
    body = s.split("#", 1)[0].strip()
    if not body.endswith("]"):
        return None
    body = body.strip("[]")
    if not body or "=" in body:
        return None
    return "".join(body.split()).replace('"', "").replace("'", "")


def _assigned(s: str) -> str | None:
    left, eq, _ = s.partition("=")
    if not eq or not left.strip() or any(c not in _KEY_CHARS for c in left):
        return None
    return "".join(left.split()).replace('"', "").replace("'", "")


# ── profiles ───────────────────────────────────────────────────────────────────────────────────────────────

def check_profiles(profiles: Mapping[str, Any], data: Mapping[str, Any], measure: Mapping[str, Any], fail) -> None:
    """Known profile names only; an override lands in the section where the base spec sets that key."""
    sections = {"data": data, "measure": measure}
    for name, body in profiles.items():
        if name not in PROFILES:
            fail(f"profiles.{name}", f"unknown profile '{name}'" + did_you_mean(name, PROFILES)
                 + f" (profiles: {', '.join(PROFILES)})")
        if not isinstance(body, dict):
            fail(f"profiles.{name}", "a profile must be a table")
        for section, over in body.items():
            if section not in sections or not isinstance(over, dict):
                continue  # reported by the caller
            other = "measure" if section == "data" else "data"
            for key in over:
                if key in sections[other]:
                    fail(f"profiles.{name}.{section}.{key}",
                         f"'{key}' is set in [{other}], so this override would be ignored; "
                         f"write it as profiles.{name}.{other}.{key}")
