"""The command group, its exit codes, the error guard and the -q/-v options that every command shares."""

from __future__ import annotations

import functools
import os
import sys
import traceback

import click

from bench import __version__
from bench.ground.errors import BenchError

EXIT_HELP = """Exit codes: 0 the run completed (whatever the verdicts), 1 an outcome named by --fail-on occurred,
2 bad input (spec, command line, model name), 3 the measurement crashed for every cell, 4 an internal error
(a bug in bench: please report it; -v shows the traceback)."""
EXIT_INTERNAL = 4
VERBOSITY = "bench.verbosity"  # key in click's per-invocation ctx.meta: -1 quiet, 0 normal, 1 verbose

OUTCOMES = ("supported", "refuted", "inconclusive", "error", "skipped")


def verbosity() -> int:
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(VERBOSITY, 0) if ctx else 0


def _guard(fn):
    """Turn BenchErrors into a one-line message and their exit code; any other exception is a bug: exit 4."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BenchError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted: finished cells are cached; run the same command again to resume", err=True)
            sys.exit(130)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: one line, its own exit code, the traceback on -v
            if verbosity() > 0:
                traceback.print_exc()
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            click.echo(f"internal error: {type(exc).__name__}{': ' + first if first else ''} "
                       f"(a bug in bench; {'see the traceback above' if verbosity() > 0 else 'rerun with -v for the traceback'})",
                       err=True)
            sys.exit(EXIT_INTERNAL)

    return wrapper


def _set_verbosity(ctx: click.Context, param: click.Parameter, value: int) -> None:
    if value:
        ctx.meta[VERBOSITY] = -1 if param.name == "quiet" else 1


def _verbosity_options(fn):
    """-q / -v, accepted before or after the command name."""
    fn = click.option("-v", "--verbose", count=True, expose_value=False, callback=_set_verbosity, is_eager=True,
                      help="More output: library warnings, tracebacks of internal errors.")(fn)
    return click.option("-q", "--quiet", count=True, expose_value=False, callback=_set_verbosity, is_eager=True,
                        help="Less output: no progress, no tables; errors and the final lines only.")(fn)


@click.group(help=f"Verify published claims about language-model internals.\n\n{EXIT_HELP}")
@click.version_option(version=__version__, prog_name="bench")
@_verbosity_options
def main() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    _quiet_libraries(verbosity() <= 0)


def _quiet_libraries(quiet: bool) -> None:
    """bench draws its own progress; keep the libraries' chatter and progress bars out unless -v.  Set through the
    environment, read when transformers is first imported (a run replayed from the cache never imports it)."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if quiet:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        import warnings  # deprecation notices that libraries raise about each other's APIs are not the user's

        warnings.filterwarnings("ignore", module=r"(transformers|peft|trl|accelerate|torch|huggingface_hub)(\.|$)")
    if "transformers" in sys.modules:  # pragma: no cover - imported by an embedding program
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        if quiet:
            hf_logging.set_verbosity_error()
