"""The command line's app: the typer application, its global options, and how a command is run
(failures turned into one message and an exit code, Ctrl-C and SIGTERM, the resume hint).
One module per command registers on ``app`` (migrator/cli/).

What it prints (messages, progress bars, report tables) is ``migrator.render``.

Imported for every ``--help`` and completion TAB, so it imports typer and the standard library
alone: the commands, ``render`` (rich), the mapping loader (yaml) and the drivers they pull in
are imported inside the functions that use them (tests/test_cli_imports.py checks it)."""

import json
import os
import shlex
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperOption

from migrator import __version__
from migrator.cli import coercion  # noqa: F401  (typer's coercion, built when needed)
from migrator.errors import (
    EXIT_CONNECT,
    EXIT_USAGE,
    MappingErrors,
    MigratorError,
    NothingWritten,
    decided,
    interrupted_starting,
    outcome,
)
from migrator.urls import mask, mask_text


def _flag_type(self: TyperOption, ctx: Any) -> str | None:
    """No type column for a flag in --help: typer 0.29 writes ``<bool>`` after every flag
    (--json, --resume, --help...), which takes no value."""
    return None if self.is_flag else _option_type(self, ctx)


_option_type = TyperOption.display_type_rich
TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

app = typer.Typer(
    name="migrator",
    help="Move a MySQL schema and its data into Redis, indexes included, and prove it.\n\n"
    "Example: migrator migrate shop.yaml",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
_debug = False


def _set_debug(value: bool) -> bool:
    global _debug
    _debug = _debug or value
    return value


DebugOpt = Annotated[
    bool,
    typer.Option(
        "--debug",
        help="Show the traceback of errors (for bug reports); before or after the command.",
        callback=_set_debug,
        is_eager=True,
    ),
]


def fail(e: MigratorError, as_json: bool = False) -> NoReturn:
    """One red message naming the cause and the fix (never a password); the exit code of
    its kind. ``as_json``: also ``{"error", "hint", "exit_code"}`` on stdout."""
    from migrator.render.console import say

    if _debug:
        traceback.print_exc()
    decided(e.exit_code)
    errors = e.errors if isinstance(e, MappingErrors) else [e]
    for one in errors:
        say("error", mask_text(one.message), mask_text(one.hint) if one.hint else None)
    if as_json:
        failure = failure_dict(e)
        if len(errors) > 1:
            failure["errors"] = [failure_dict(one) for one in errors]
        json_line(failure)
    raise typer.Exit(e.exit_code)


def json_line(value: dict[str, Any]) -> None:
    """One JSON object on one line of stdout (``--json``: every line is an object)."""
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def failure_dict(e: MigratorError) -> dict[str, Any]:
    return {
        "error": mask_text(e.message),
        "hint": mask_text(e.hint) if e.hint else None,
        "exit_code": e.exit_code,
    }


def note_default_target(mapping: str, target: str | None) -> None:
    """Say on stderr when the target is the built-in default: no --target, no
    $MIGRATOR_TARGET_URL, no 'target:' in the mapping."""
    if target or os.environ.get("MIGRATOR_TARGET_URL"):
        return
    from migrator.commands.session import DEFAULT_TARGET
    from migrator.mapping.loader import load_mapping
    from migrator.render.console import say

    try:
        named = load_mapping(mapping).target
    except MigratorError:  # the command itself reports it
        return
    if not named:
        say(
            "note",
            f"no target given: using the default {DEFAULT_TARGET}",
            "set 'target:' in the mapping, pass --target URL, or export MIGRATOR_TARGET_URL",
        )


#: a command's run said why it was interrupted (``run``): typer's 130 alone says nothing
said: list[bool] = []


def run(fn: Callable[[], int], resume: str | None = None, as_json: bool = False) -> None:
    """Call a command, turning every failure into a message and an exit code (with
    ``as_json`` also a JSON object on stdout). ``resume``: how to continue after Ctrl-C or
    SIGTERM (both stop it the same way, workers included), for a command that leaves work
    half done."""
    previous = signal.getsignal(signal.SIGTERM)
    if resume is not None:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        code = fn()
    except MigratorError as e:
        fail(e, as_json)
    except KeyboardInterrupt as e:
        decided(130)
        said.append(True)
        from migrator.render.console import say

        # interrupted before the first write: nothing to continue; an online first load: its
        # own hint (what is stored, the command that resumes it)
        hint = None if isinstance(e, NothingWritten) else getattr(e, "hint", None) or resume
        say("error", "interrupted", hint)
        if as_json:
            json_line({"error": "interrupted", "hint": hint, "exit_code": 130})
        raise typer.Exit(130) from None
    except Exception as e:  # anything a command did not foresee: still one line and a hint
        from migrator.commands.failures import explain

        fail(explain(e, resumable=resume is not None), as_json)
    else:
        decided(code)
        raise typer.Exit(code)
    finally:
        if resume is not None and outcome() is None:
            signal.signal(signal.SIGTERM, previous)


@contextmanager
def importing() -> Iterator[None]:
    """Around a command's own imports (its libraries load once it is chosen, not for --help):
    a Ctrl-C or SIGTERM there is one line and exit 130, as while the program starts
    (migrator/__main__.py), not typer's silent 130."""
    try:
        yield
    except KeyboardInterrupt:
        interrupted_starting()


def _terminated(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM: stop like Ctrl-C (workers too), then say how to resume


def resume_command(
    mapping: str, options: dict[str, object], command: str = "migrate", last: str = "--resume"
) -> str:
    """The command that continues this run: every option that was given (those set through
    their environment variable are left to it), ``last``, passwords masked with a note
    to supply them again. ``options``: flag -> value (None or False: not given)."""
    from_env = {"--source": "MIGRATOR_SOURCE_URL", "--target": "MIGRATOR_TARGET_URL",
                "--workers": "MIGRATOR_WORKERS",
                "--server-id": "MIGRATOR_SYNC_SERVER_ID"}  # fmt: skip
    words = ["migrator", command, shlex.quote(mapping)]
    masked = False
    for flag, value in options.items():
        if value is None or value is False:
            continue
        if flag in from_env and os.environ.get(from_env[flag]) == str(value):
            continue
        if value is True:
            words.append(flag)
            continue
        text = str(value)
        shown = mask(text) if flag in ("--source", "--target") else text
        masked = masked or shown != text
        words += [flag, shlex.quote(shown)]
    command = " ".join([*words, last] if last else words)
    return command + (" (passwords are shown as ***: type them again)" if masked else "")


@app.callback(invoke_without_command=True)
def main_options(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
    debug: DebugOpt = False,
) -> None:
    """Move a MySQL schema and its data into Redis. Example: migrator migrate shop.yaml"""
    if version:
        from migrator.render.console import out

        out.print(f"migrator {__version__}")
        raise typer.Exit(0)


def main() -> None:
    """Console entry point. Command-line mistakes (an unknown option, ``--batch-size abc``)
    are one error line and a hint too, and a JSON object with ``--json``."""
    said.clear()
    try:
        code = app(standalone_mode=False)
    except KeyboardInterrupt:  # while typer builds the command line, before it parses
        interrupted_starting()
    except typer.TyperException as e:  # the parser's own errors (click's UsageError...)
        if type(e).__name__ == "NoArgsIsHelpError":
            e.show()  # type: ignore[attr-defined]
            sys.exit(EXIT_USAGE)
        words = [a for a in sys.argv[1:] if not a.startswith("-")]
        names = {c.name or getattr(c.callback, "__name__", "") for c in app.registered_commands}
        command = words[0] if words and words[0] in names else "COMMAND"
        mistake = MigratorError(e.format_message(), f"see 'migrator {command} --help'")
        mistake.exit_code = getattr(e, "exit_code", EXIT_USAGE) or EXIT_USAGE
        try:
            fail(mistake, as_json="--json" in sys.argv[1:])
        except typer.Exit as done:
            sys.exit(done.exit_code)
    except typer.Abort:  # an interrupt outside a command's run (parsing its options...)
        interrupted_starting("error: interrupted: nothing was done\n")
    except MigratorError as e:  # raised outside a command (should not happen)
        from migrator.render.console import err

        err.print(f"error: {e}")
        sys.exit(EXIT_USAGE if e.exit_code != EXIT_CONNECT else EXIT_CONNECT)
    if code == 130 and not said:  # typer's own: an interrupt while it parsed, said nothing
        interrupted_starting()
    code = code if isinstance(code, int) else 0
    decided(code)
    sys.exit(code)
