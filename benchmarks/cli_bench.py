"""How fast the command line answers (issue 34 item 5): ``migrator --help``, every
``migrator COMMAND --help`` and shell-completion TABs, each timed as a whole process.

    .venv/bin/python benchmarks/cli_bench.py            # --runs 9; --limit-ms 300; --check

Each case runs the installed ``migrator`` script beside this Python (the console entry point a
user types) once to warm the file cache and write the bytecode (PYTHONDONTWRITEBYTECODE is
dropped for the runs: an installed package has its .pyc files), then ``--runs`` times; it
prints min, median and max wall time in ms, the median CPU time (user + system: what the
process itself costs, less sensitive to the machine's load) and whether the median wall time
is under the limit (300 ms: issue 34's "answers at once"). Two rows come first, for scale:
the interpreter alone (``python -c pass``), the floor every case stands on, and the help of a
one-option typer app (typer and rich imported, a help drawn as migrator's is): what any help
drawn by typer costs here.

A TAB is the call a shell's completion function makes (typer/click's protocol: the environment
variables ``_MIGRATOR_COMPLETE=complete_bash``, ``COMP_WORDS`` = the line so far,
``COMP_CWORD`` = the index of the word under the cursor). Completing ``--tables`` reads the
mapping (YAML) to offer its table names: timed too, on mappings/demo.yaml. Every run's output
is checked (help printed, the expected completion offered), so a broken case is an error, not a
fast figure. No server is needed. The load average is printed before and after: on a busy
machine the figures grow with it.

``--check`` exits 1 when a median is over the limit. Run it with PYTHONPATH=DIR to time the
code in DIR (another checkout) with this virtualenv's libraries.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = Path(sys.executable).with_name("migrator")
DEMO = ROOT / "mappings" / "demo.yaml"
TYPER_APP = (
    "import typer\n"
    "app = typer.Typer(rich_markup_mode='markdown')\n"
    "@app.command()\n"
    "def one(name: str = typer.Option('x', help='A name.')) -> None:\n"
    "    'One command.'\n"
    "app()\n"
)


class Case(NamedTuple):
    label: str
    args: tuple[str, ...]
    expect: str  # printed on stdout by a correct run
    env: tuple[tuple[str, str], ...] = ()


def commands() -> list[str]:
    """The app's commands, as --help lists them."""
    import typer.main

    from migrator.cli import app

    return list(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def tab(line: str, expect: str) -> Case:
    words = line.split(" ")
    env = (("_MIGRATOR_COMPLETE", "complete_bash"), ("COMP_WORDS", line),
           ("COMP_CWORD", str(len(words) - 1)))  # fmt: skip
    return Case(f"TAB: {line}", (), expect, env)


def cases() -> list[Case]:
    found = [Case("migrator --help", ("--help",), "Usage")]
    found += [Case(f"migrator {c} --help", (c, "--help"), "Usage") for c in commands()]
    found += [
        tab("migrator mi", "migrate"),
        tab("migrator migrate --ta", "--tables"),
        tab(f"migrator migrate {DEMO.relative_to(ROOT)} --tables ", "emp"),
    ]
    return found


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def run_once(case: Case, program: list[str]) -> tuple[float, float]:
    """Wall and CPU time of one run, in ms."""
    env = {**os.environ, "COLUMNS": "100", **dict(case.env)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run([*program, *case.args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120, check=False)  # fmt: skip
    took, cpu = time.perf_counter() - start, children_cpu() - cpu
    if done.returncode != 0 or case.expect not in done.stdout:
        sys.exit(f"{case.label}: exit {done.returncode}, no {case.expect!r} in the output:\n"
                 f"{done.stdout[-800:]}{done.stderr[-800:]}")  # fmt: skip
    return took * 1000, cpu * 1000


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f}/{five:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="timed runs per case (default 9)")
    parser.add_argument("--limit-ms", type=float, default=300.0, help="the target (300 ms)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a median is over it")
    args = parser.parse_args()
    if not PROGRAM.exists():
        sys.exit(f"no {PROGRAM}: install the project into this Python first (make install)")
    print(f"{PROGRAM} on {os.cpu_count()} CPUs, load average (1/5 min) {load()}, "
          f"{args.runs} runs per case")  # fmt: skip
    print(f"{'wall ms:':<56} {'min':>6} {'median':>6} {'max':>6}  {'CPU ms':>6}  "
          f"under {args.limit_ms:.0f} ms")  # fmt: skip
    over = []
    floors = [
        Case("(the interpreter alone: python -c pass)", ("-c", "print('Usage')"), "Usage"),
        Case("(a one-option typer app's --help)", ("-c", TYPER_APP, "--help"), "Usage"),
    ]
    for case in [*floors, *cases()]:
        floor = case in floors
        program = [sys.executable] if floor else [str(PROGRAM)]
        run_once(case, program)  # warm-up: file cache, bytecode
        runs = [run_once(case, program) for _ in range(args.runs)]
        times = [wall for wall, _ in runs]
        median = statistics.median(times)
        under = median < args.limit_ms
        if not under and not floor:
            over.append(case.label)
        print(f"{case.label:<56} {min(times):6.0f} {median:6.0f} {max(times):6.0f}  "
              f"{statistics.median(cpu for _, cpu in runs):6.0f}  "
              f"{'-' if floor else 'yes' if under else 'NO'}", flush=True)  # fmt: skip
    print(f"load average after: {load()}")
    if args.check and over:
        sys.exit(f"over {args.limit_ms:.0f} ms (median): {', '.join(over)}")


if __name__ == "__main__":
    main()
