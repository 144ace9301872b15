"""Builds the engine's hot modules with mypyc (the list and the reasons: kueued/native.py).

``KUEUED_COMPILE=0`` builds pure Python.  Without a C compiler, or if mypyc fails, the build
says so and goes on pure: the engine is the same code, slower.  The metadata is pyproject.toml's.
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

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "kueued" / "_native_build.json"
BUILDS = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install"}


def compiled_modules() -> tuple[str, ...]:
    tree = ast.parse((HERE / "kueued" / "native.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "COMPILED" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise SystemExit("setup.py: kueued/native.py has no COMPILED tuple")


class OptionalBuildExt(build_ext):
    """A failed compile leaves a pure build (and no manifest, so nothing claims to be compiled)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # CCompilerError, PlatformError, a missing header: all end the same
            MANIFEST.unlink(missing_ok=True)
            print(f"kueued: the compiled engine did not build ({e}); installing pure Python",
                  file=sys.stderr)


def extensions() -> list:
    MANIFEST.unlink(missing_ok=True)
    if os.environ.get("KUEUED_COMPILE", "1") in ("0", "") or not BUILDS & set(sys.argv[1:]):
        return []
    modules = compiled_modules()
    paths = [str(Path(*m.split(".")).with_suffix(".py")) for m in modules]
    try:
        from mypyc.build import mypycify
        exts = mypycify(["--ignore-missing-imports", *paths], opt_level="3")
    except Exception as e:  # mypyc missing or refusing a module: pure, and say why
        print(f"kueued: mypyc did not compile the engine ({e}); installing pure Python", file=sys.stderr)
        return []
    digests = {m: hashlib.sha256((HERE / p).read_bytes()).hexdigest() for m, p in zip(modules, paths, strict=True)}
    MANIFEST.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n")
    return exts


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt},
      package_data={"kueued": ["_native_build.json"]})
