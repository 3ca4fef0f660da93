"""Build the sdist and the wheel, and check that they hold what they claim (`make dist`).

    .venv/bin/python scripts/check_dist.py [--outdir DIR]

1. ``python -m build``: the sdist, then the wheel built from that sdist (so the sdist is
   complete enough to build from), into DIR (default: a temporary directory, removed after);
2. ``twine check --strict`` on both (metadata, README rendering);
3. the wheel: every file of the package, data files included (the mapping JSON Schema
   wherever it lives, ``py.typed``), the ``migrator`` command, the licence and its SPDX
   expression, the version of ``migrator.__version__``, the documentation's address
   (``Project-URL: Documentation``, the ``DOCS`` that messages cite), and nothing else (no
   tests);
4. the sdist: every file git tracks except the GitHub settings (tests, their data and
   support files included), and no file git does not track;
5. the tests that need no server (``pytest -m "not integration"``), run from the unpacked
   sdist against its own copy of the package.

Exit 0 when all hold; otherwise each problem is printed and the exit code is 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "migrator"
NOT_SHIPPED = (".github/", ".gitignore")  # tracked, but left out of the sdist (MANIFEST.in)
SDIST_EXTRAS = ("PKG-INFO", "setup.cfg", f"{PACKAGE}.egg-info/")  # written by setuptools


def run(argv: list[str], cwd: Path = REPO, env: dict[str, str] | None = None) -> str:
    """Run a command that must succeed; its output, or exit 1 with it."""
    proc = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, check=False
    )  # fmt: skip
    if proc.returncode != 0:
        sys.exit(f"failed ({proc.returncode}): {' '.join(argv)}\n{proc.stdout}{proc.stderr}")
    return proc.stdout


def package_files() -> set[str]:
    """The package's files in the source tree, as wheel paths (``migrator/...``)."""
    found = set()
    for path in (REPO / PACKAGE).rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            found.add(path.relative_to(REPO).as_posix())
    return found


def check_wheel(wheel: Path, version: str) -> list[str]:
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = f"{PACKAGE}-{version}.dist-info"
        metadata = zf.read(f"{info}/METADATA").decode()
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
    problems = [f"wheel lacks {name}" for name in sorted(package_files() - names)]
    schema = sorted(REPO.glob(f"{PACKAGE}/**/mapping.schema.json"))
    if not schema:
        problems.append("no mapping.schema.json in the source tree")
    for path in schema:
        if path.relative_to(REPO).as_posix() in names:  # when not, "wheel lacks" says so
            print(f"  wheel holds {path.relative_to(REPO).as_posix()}")
    strays = [n for n in names if not n.startswith((f"{PACKAGE}/", f"{info}/"))]
    problems += [f"wheel holds {name}, outside the package" for name in sorted(strays)]
    if f"{info}/licenses/LICENSE" not in names:
        problems.append(f"wheel lacks {info}/licenses/LICENSE")
    for line in ("License-Expression: MIT", f"Version: {version}", "License-File: LICENSE"):
        if line not in metadata.splitlines():
            problems.append(f"wheel METADATA lacks {line!r}")
    from migrator.errors import DOCS

    if f"Project-URL: Documentation, {DOCS}" not in metadata.splitlines():
        problems.append(f"wheel METADATA does not name the documentation ({DOCS})")
    if f"{PACKAGE} = {PACKAGE}.__main__:main" not in entry_points:
        problems.append("wheel has no 'migrator' console script")
    return problems


def tracked_files() -> set[str] | None:
    """What git tracks, less what is not shipped; None outside a git checkout."""
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        return None
    out = run(["git", "ls-files", "-z"])
    return {f for f in out.split("\0") if f and not f.startswith(NOT_SHIPPED)}


def check_sdist(sdist: Path, version: str) -> list[str]:
    top = f"{PACKAGE}-{version}/"
    with tarfile.open(sdist) as tf:
        names = {m.name[len(top) :] for m in tf.getmembers() if m.isfile()}
    problems = []
    tracked = tracked_files()
    if tracked is None:
        print("  not a git checkout: the sdist is not compared with git ls-files")
        tracked = set()
    else:
        problems += [f"sdist lacks {name}" for name in sorted(tracked - names)]
        untracked = {n for n in names - tracked if not n.startswith(SDIST_EXTRAS)}
        problems += [f"sdist holds {name}, which git does not track" for name in sorted(untracked)]
    for needed in ("LICENSE", "tests/conftest.py", "tests/data/sakila/SOURCE.md"):
        if needed not in names:
            problems.append(f"sdist lacks {needed}")
    print(f"  sdist holds {len(names)} files ({len(tracked)} tracked by git and shipped)")
    return problems


def check_sdist_tests(sdist: Path, version: str, scratch: Path) -> list[str]:
    """The pure tests, run from the unpacked sdist with its own package first on the path."""
    with tarfile.open(sdist) as tf:
        tf.extractall(scratch, filter="data")
    root = scratch / f"{PACKAGE}-{version}"
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    where = run([sys.executable, "-c", f"import {PACKAGE}; print({PACKAGE}.__file__)"], root, env)
    if not Path(where.strip()).is_relative_to(root):
        return [f"the sdist's tests would import {where.strip()}, not the sdist's package"]
    argv = [sys.executable, "-m", "pytest", "-q", "-m", "not integration", "-p", "no:cacheprovider"]
    argv += ["-n", "2"]  # pytest-xdist, of the dev extra: the pure tests on both cores
    out = run(argv, root, env)
    print(f"  tests from the sdist: {out.strip().splitlines()[-1]}")
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outdir", type=Path, help="where the sdist and wheel go (kept)")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # before stderr's
    with tempfile.TemporaryDirectory(prefix="migrator-dist-") as tmp:
        outdir = args.outdir.resolve() if args.outdir else Path(tmp) / "dist"
        sys.path.insert(0, str(REPO))
        from migrator import __version__ as version

        for old in outdir.glob(f"{PACKAGE}-{version}*"):
            old.unlink()
        print(f"building {PACKAGE} {version} into {outdir}")
        run([sys.executable, "-m", "build", "--outdir", str(outdir), str(REPO)])
        sdist = outdir / f"{PACKAGE}-{version}.tar.gz"
        wheel = outdir / f"{PACKAGE}-{version}-py3-none-any.whl"
        print(run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)]))
        problems = check_wheel(wheel, version) + check_sdist(sdist, version)
        if not problems:
            problems = check_sdist_tests(sdist, version, Path(tmp))
    for problem in problems:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"sdist and wheel OK: {sdist.name}, {wheel.name}")


if __name__ == "__main__":
    main()
