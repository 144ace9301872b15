"""Builds the engine's hot modules with mypyc (the list and the reasons: kueued/native.py).

``KUEUED_COMPILE=0`` builds pure Python.  Without a C compiler, or if mypyc fails, the build
says so and goes on pure: the engine is the same code, slower.  The metadata is pyproject.toml's.

The build records a SHA-256 of each source it compiled (``kueued/_native_build.json``), which
``kueued.native`` checks before importing an extension.  An editable install (``pip install -e``,
what ``make`` does) builds the extensions in the checkout and writes the record there; any other
build writes it into the wheel and leaves the checkout's record alone, since the checkout's
extensions are not the ones it built.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
MANIFEST = Path("kueued") / "_native_build.json"
COMMANDS = set(sys.argv[1:])
IN_PLACE = bool({"editable_wheel", "develop"} & COMMANDS)
BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}


def compiled_modules() -> tuple[str, ...]:
    tree = ast.parse((HERE / "kueued" / "native.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "COMPILED" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise SystemExit("setup.py: kueued/native.py has no COMPILED tuple")


def sources(modules: tuple[str, ...]) -> list[str]:
    return [str(Path(*m.split(".")).with_suffix(".py")) for m in modules]


def digests(modules: tuple[str, ...]) -> str:
    record = {m: hashlib.sha256((HERE / p).read_bytes()).hexdigest()
              for m, p in zip(modules, sources(modules), strict=True)}
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


class OptionalBuildExt(build_ext):
    """A failed compile leaves a pure build, and no record (nothing claims to be compiled)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # CCompilerError, PlatformError, a missing header: all end the same
            RECORD.clear()
            (HERE / MANIFEST if IN_PLACE else Path(self.build_lib) / MANIFEST).unlink(missing_ok=True)
            print(f"kueued: the compiled engine did not build ({e}); installing pure Python", file=sys.stderr)


class BuildPyWithRecord(build_py):
    """A wheel's record goes into the wheel (after build_ext, which the wheel runs first)."""

    def run(self) -> None:
        super().run()
        if RECORD and not IN_PLACE:
            target = Path(self.build_lib) / MANIFEST
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(RECORD[0])


RECORD: list[str] = []  # the record of this build, once its extensions are set up


def extensions() -> list:
    if IN_PLACE:
        (HERE / MANIFEST).unlink(missing_ok=True)  # the old extensions are about to be replaced
    if os.environ.get("KUEUED_COMPILE", "1") in ("0", "") or not BUILDS & COMMANDS:
        return []
    modules = compiled_modules()
    try:
        from mypyc.build import mypycify
        exts = mypycify(["--ignore-missing-imports", *sources(modules)], opt_level="3")
    except Exception as e:  # mypyc missing or refusing a module: pure, and say why
        print(f"kueued: mypyc did not compile the engine ({e}); installing pure Python", file=sys.stderr)
        return []
    RECORD.append(digests(modules))
    if IN_PLACE:
        (HERE / MANIFEST).write_text(RECORD[0])
    return exts


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt, "build_py": BuildPyWithRecord})
