"""Build step: copy the top-level ``specs/`` and ``templates/`` folders into the package as ``bench/_data``.

The metadata lives in pyproject.toml; this file only adds the copy, so the wheel carries what the tool reads.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SHIPPED = ("specs", "templates")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".*")


class BuildWithData(build_py):
    def run(self):
        super().run()
        here = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "bench" / "_data"
        for name in SHIPPED:
            if (target / name).exists():
                shutil.rmtree(target / name)
            shutil.copytree(here / name, target / name, ignore=IGNORE)


setup(cmdclass={"build_py": BuildWithData})
