"""The `planner` command line's shell: the typer app, its two consoles (tables on stdout as wide as piped output
needs, errors on stderr), the decorator that turns a `PlannerError` or an unwritable output file into one line
and exit status 2, and `main`, the installed script, which does the same for what the parser refuses. The
commands themselves are in `planner.cli`, which registers them on this app.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from planner.inputs.edge import one_line
from roofline.errors import PlannerError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Capacity planner for serving MoE LLMs.")
# Piped output (files, CI logs, tests) gets tables wide enough for every column instead of rich's
# 80-column default, which cut cells short ('nee' for 'needs'); a COLUMNS the user sets wins.
PIPED_WIDTH = 320


def _stdout_gone() -> None:
    """The reader of stdout has gone (`planner plan | head`): the rest of the output goes to the null
    device and the command goes on to its files (--scenarios, --chart, --out) and its own exit status.
    Before, rich exited 1 at once (no files written) and a JSON print read 'error: [Errno 32] Broken pipe'."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


class _Console(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        _stdout_gone()


def out(text: str) -> None:
    """Print a command's JSON to stdout, as `con` prints its tables (a reader that has gone is no error)."""
    try:
        print(text, flush=True)
    except BrokenPipeError:
        _stdout_gone()


con = _Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else PIPED_WIDTH)
err = Console(stderr=True, width=None if sys.stderr.isatty() or os.environ.get("COLUMNS") else 160)

JsonFlag = Annotated[bool, typer.Option("--json", help="print JSON instead of tables")]


def user_errors(fn: Callable[..., None]) -> Callable[..., None]:
    @wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except PlannerError as exc:
            # user text (names, paths, values) is never read as rich markup, and never wrapped
            err.print(Text.assemble(("error:", "red"), " ", one_line(str(exc), 2000)), soft_wrap=True)
            raise typer.Exit(2) from None
        except OSError as exc:  # an output file that cannot be written (the .part file is left out)
            what = f"{exc.filename}: {exc.strerror}" if exc.filename else str(exc)
            err.print(Text.assemble(("error:", "red"), " ", one_line(what, 2000)), soft_wrap=True)
            raise typer.Exit(2) from None

    return run


def writable(flag: str, path: Path | None) -> None:
    """An output path's folder exists, checked before the run rather than after minutes of work."""
    if path is not None and not path.resolve().parent.is_dir():
        raise PlannerError(f"{flag}: folder {str(path.parent)!r} does not exist")
    if path is not None and path.is_dir():
        raise PlannerError(f"{flag}: {str(path)!r} is a folder; give a file name")


def _parser_errors(name: str) -> tuple[type[BaseException], ...]:
    """The command-line parser's exception class `name`: typer 0.2x parses with its own vendored copy
    of click (`typer._click`, whose classes are not click's, and click need not be installed), older
    typer with click itself; each module present gives its class."""
    found = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            m = importlib.import_module(module)
        except ImportError:
            continue
        if hasattr(m, name):
            found.append(getattr(m, name))
    return tuple(found)


def main() -> None:
    """The `planner` script: the app, with a bad option or argument (`--osl abc`, an unknown flag, a
    missing argument) told in one line naming it and what is allowed (exit 2), as a PlannerError is,
    instead of the parser's boxed usage panel."""
    args = sys.argv[1:] or ["--help"]  # bare `planner`: its help, as every click and typer version prints it
    try:
        code = app(args, standalone_mode=False)  # a command's typer.Exit comes back as its exit code
    except _parser_errors("NoArgsIsHelpError"):  # (typer printed the help before raising)
        sys.exit(2)
    except _parser_errors("UsageError") as exc:
        ctx = getattr(exc, "ctx", None)
        where = f"{ctx.command_path}: " if ctx is not None else ""
        text = exc.format_message()  # type: ignore[attr-defined]
        err.print(Text.assemble(("error:", "red"), " ", where, one_line(text, 2000)), soft_wrap=True)
        sys.exit(2)
    except _parser_errors("Exit") as exc:
        sys.exit(getattr(exc, "exit_code", 0))
    except _parser_errors("Abort"):
        sys.exit(1)
    if isinstance(code, int) and code:
        sys.exit(code)
