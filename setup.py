"""Build the optional C accelerator ``gcfkit._speedups``; the metadata is in pyproject.toml.

The extension is optional in the way the stdlib's ``_json`` is: without a C compiler or the
Python headers the build says so and installs the pure-Python codec, which is the reference
implementation and behaves identically (``gcfkit.speedups_active()`` tells which one runs).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_NOTE = (
    "gcfkit: the optional C accelerator (gcfkit._speedups) was not built ({why}); "
    "installing the pure-Python codec, which gives the same results more slowly. "
    "Install a C compiler and the Python headers and reinstall to get it."
)


class OptionalBuildExt(build_ext):
    """A ``build_ext`` whose failure (no compiler, no headers) is a warning, not an error."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # no compiler at all fails here, before any extension
            self._skip(e)

    def build_extension(self, ext: Any) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:
            self._skip(e)

    @staticmethod
    def _skip(e: BaseException) -> None:
        # pip shows a build's output only with -v; gcfkit.speedups_active() is the check
        # that always works. stderr and a banner make it stand out where it is shown.
        line = "*" * 78
        print(f"{line}\n{_NOTE.format(why=e)}\n{line}", file=sys.stderr)


# GCFKIT_SPEEDUPS_CFLAGS lets the leak and memory checks build with -O0 -g or sanitizers.
_extra = os.environ.get("GCFKIT_SPEEDUPS_CFLAGS", "").split()

setup(
    ext_modules=[
        Extension(
            "gcfkit._speedups",
            sources=["src/gcfkit/_speedups.c"],
            optional=True,
            extra_compile_args=_extra,
        ),
        # Exact o200k/cl100k token counts from compact tables (gcfkit.tokens; optional too).
        Extension(
            "gcfkit._bpe",
            sources=["src/gcfkit/_bpe.c"],
            depends=["src/gcfkit/_bpe_unicode.h"],
            optional=True,
            extra_compile_args=_extra,
        ),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
