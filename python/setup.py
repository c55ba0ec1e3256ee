"""Bundles libalma.so into the package when it is built: from $ALMA_LIBRARY, else the repository's
CMake build (../build/libalma.so). Without one the package still installs, and finds the library
at run time ($ALMA_LIBRARY, ~/.local/lib after `cmake --install build --prefix ~/.local`, or the
system's library path)."""
import os
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution


def _libalma():
    env = os.environ.get("ALMA_LIBRARY")
    if env:
        return Path(env)
    p = Path(__file__).resolve().parent.parent / "build" / "libalma.so"
    return p if p.exists() else None


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = _libalma()
        if lib is None or not lib.exists():
            print("alma: no libalma.so to bundle (build it with cmake, or set ALMA_LIBRARY); the package will "
                  "look for it at run time", file=sys.stderr)
            return
        dest = Path(self.build_lib) / "alma" / "_native"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(lib, dest / "libalma.so")
        print(f"alma: bundled {lib}", file=sys.stderr)


class BinaryDistribution(Distribution):
    # the bundled library is machine code: a platform wheel, not a pure-Python one
    def has_ext_modules(self):
        return _libalma() is not None


setup(cmdclass={"build_py": BuildPy}, distclass=BinaryDistribution)
