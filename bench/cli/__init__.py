"""The ``bench`` command line.  Thin: parse, call, print.  Exit codes: see ``bench --help``.

``base`` holds the group, the error guard and the shared options; each other module registers its commands on
the group when it is imported here.
"""

from bench.cli import check_commands, plan_commands, record_commands, run_commands, spec_commands  # noqa: F401
from bench.cli.base import EXIT_INTERNAL, _quiet_libraries, main, verbosity  # noqa: F401
from bench.cli.run_commands import OUTPUT_OPTIONS, audit, verify  # noqa: F401
