"""Native build only; metadata lives in pyproject.toml.

Every kernel in native/lorescan/<name>.pyx becomes lorescan.<name>. Without a working
compiler the build falls back to the pure-Python twins and says so; with
LORESCAN_REQUIRE_NATIVE=1 a kernel that does not build is an error.
"""
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

KERNELS = ["_wordscan_c", "_hits_c"]
REQUIRED = os.environ.get("LORESCAN_REQUIRE_NATIVE") == "1"


class OptionalBuildExt(build_ext):
    """Build the Cython kernels; without a compiler, fall back visibly (or fail in CI)."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - distutils raises several unrelated types here
            if REQUIRED or not _is_compiler_problem(exc):
                raise
            print(f"lorescan: native kernels not built ({exc}); using the pure-Python twins")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            if REQUIRED or not _is_compiler_problem(exc):
                raise
            print(f"lorescan: {ext.name} not built ({exc}); using its pure-Python twin")


def _is_compiler_problem(exc: BaseException) -> bool:
    from setuptools.errors import CCompilerError, ExecError, PlatformError

    return isinstance(exc, (CCompilerError, ExecError, PlatformError))


def _extensions():
    try:
        from Cython.Build import cythonize
    except ImportError:
        if REQUIRED:
            raise
        print("lorescan: Cython is not installed; using the pure-Python twins")
        return []
    exts = [Extension(f"lorescan.{k}", [f"native/lorescan/{k}.pyx"]) for k in KERNELS]
    return cythonize(exts, include_path=["native"], language_level=3, quiet=True)


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
