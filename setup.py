"""Native build only; metadata lives in pyproject.toml.

Every kernel in native/lorescan/<name>.pyx becomes lorescan.<name>, compiled without debug
symbols. Without a working compiler the build falls back to the pure-Python twins and says
so where the person installing sees it; with LORESCAN_REQUIRE_NATIVE=1 a kernel that does
not build is an error.
"""
import os
import stat
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

KERNELS = ["_hits_c", "_sthash_c"]
REQUIRED = os.environ.get("LORESCAN_REQUIRE_NATIVE") == "1"
# Release builds carry no debug symbols: -g0 overrides the -g of Python's own CFLAGS, and
# the linker strips the symbol table (about 1.7 MB of kernels become about 0.3 MB).
POSIX_COMPILE_ARGS = ["-g0"]
LINUX_LINK_ARGS = ["-s"]


def notify(line: str) -> None:
    """Print ``line`` for the person installing, even under a quiet ``pip install``.

    pip captures a build backend's stdout and stderr and shows them only with ``-v`` or on
    failure. The backend's parent process is the installer itself, so on Linux the line is
    also written to the installer's own stderr (``/proc/<parent>/fd/2``) when that is a
    terminal or a pipe and not where this process's stderr already goes. (A regular file is
    left alone: a second writer there would overwrite the installer's log or be overwritten.)
    """
    line = f"lorescan: {line}"
    print(line, file=sys.stderr, flush=True)
    try:
        parent_err = f"/proc/{os.getppid()}/fd/2"
        target = os.stat(parent_err)
        if os.path.samestat(target, os.fstat(2)):
            return                      # not captured: the line above was already seen
        if not (stat.S_ISCHR(target.st_mode) or stat.S_ISFIFO(target.st_mode)):
            return
        with open(parent_err, "a", encoding="utf-8") as err:
            err.write(f"\n{line}\n")
    except OSError:
        pass                            # no /proc (not Linux) or no permission: -v shows it


class OptionalBuildExt(build_ext):
    """Build the Cython kernels; without a compiler, fall back visibly (or fail in CI)."""

    def build_extensions(self):
        if self.compiler.compiler_type == "unix":
            for ext in self.extensions:
                ext.extra_compile_args = POSIX_COMPILE_ARGS + list(ext.extra_compile_args or [])
                if sys.platform.startswith("linux"):
                    ext.extra_link_args = LINUX_LINK_ARGS + list(ext.extra_link_args or [])
        super().build_extensions()

    def run(self):
        self._not_built = []
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 - distutils raises several unrelated types here
            if REQUIRED or not _is_compiler_problem(exc):
                raise
            self._not_built = [(ext.name, exc) for ext in self.extensions]
        if self._not_built:            # one line for the whole build, however many kernels failed
            names = ", ".join(name.rsplit(".", 1)[-1] for name, _ in self._not_built)
            print(f"lorescan: {self._not_built[0][1]}", file=sys.stderr)     # the details, for -v
            notify(f"native kernels not built ({names}): no working C compiler; lorescan will run on "
                   "its pure-Python twins, correct but slower (pip install -v shows the compiler error)")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # noqa: BLE001
            if REQUIRED or not _is_compiler_problem(exc):
                raise
            self._not_built.append((ext.name, exc))


def _is_compiler_problem(exc: BaseException) -> bool:
    from setuptools.errors import CCompilerError, ExecError, PlatformError

    return isinstance(exc, (CCompilerError, ExecError, PlatformError))


def _extensions():
    try:
        from Cython.Build import cythonize
    except ImportError:
        if REQUIRED:
            raise
        notify("Cython is not installed, so the native kernels are not built; "
               "lorescan will run on its pure-Python twins, correct but slower")
        return []
    exts = [Extension(f"lorescan.{k}", [f"native/lorescan/{k}.pyx"]) for k in KERNELS]
    return cythonize(exts, include_path=["native"], language_level=3, quiet=True)


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
