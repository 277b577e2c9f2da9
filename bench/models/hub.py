"""Hugging Face hub ids: the local hub cache first, then at most one short request to the hub.

A hub id is fingerprinted by the commit it resolves to (``hub:<repo>@<sha>``), read from the cache's
``snapshots/<sha>/`` folder or, when the id is not cached, from one ``model_info`` call.  Nothing here retries:
an unreachable hub costs one timeout, and its warnings and progress bars are kept out of bench's output.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 5.0  # one request; a hub that does not answer in this time counts as unreachable


@dataclass(frozen=True)
class Snapshot:
    repo: str
    commit: str  # 40-hex commit sha
    folder: Path | None  # the cached snapshot folder, None when the model is only on the hub


def looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return 1 <= len(parts) <= 2 and all(p and not p.startswith(".") for p in parts) and " " not in name


def split_revision(name: str) -> tuple[str, str | None]:
    """``"org/model@rev"`` → ``("org/model", "rev")``; a name without ``@`` has no revision."""
    base, sep, rev = name.rpartition("@")
    if not sep or not base or not rev:
        return name, None
    return base, rev


@contextlib.contextmanager
def quiet():
    """Silence the hub library's warnings, log lines and progress bars for the duration."""
    loggers = [logging.getLogger(n) for n in ("huggingface_hub", "transformers", "urllib3", "httpx")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def cached(repo: str, revision: str | None = None) -> Snapshot | None:
    """The cached snapshot of `repo` at `revision` (a branch, tag or sha; default main), without the network."""
    try:
        from huggingface_hub import try_to_load_from_cache

        with quiet():
            hit = try_to_load_from_cache(repo, "config.json", revision=revision)
    except Exception:  # noqa: BLE001 - an unusable cache is the same as no cache
        return None
    if not isinstance(hit, (str, os.PathLike)):
        return None
    folder = Path(hit).parent
    if folder.parent.name != "snapshots":
        return None
    return Snapshot(repo, folder.name, folder)


def remote(repo: str, revision: str | None = None) -> Snapshot | str:
    """The commit `repo` at `revision` has on the hub (one request), or a short reason why there is none."""
    if offline():
        return "HF_HUB_OFFLINE is set"
    try:
        from huggingface_hub import HfApi

        with quiet():
            info = HfApi().model_info(repo, revision=revision, timeout=TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - every failure (no network, no repo, no revision) becomes a reason
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"{type(exc).__name__}{': ' + text[:100] if text else ''}"
    if not getattr(info, "sha", None):
        return "the hub gave no commit for it"
    return Snapshot(repo, info.sha, None)
