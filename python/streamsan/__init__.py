"""streamsan from Python: where the wheel installed the `streamsan` command and its shim, and
the test API of the shim when it is preloaded into this process (what the pytest plugin uses)."""

import ctypes
import os
import shutil
from importlib import metadata

__all__ = ["command", "shim_path", "Shim"]


def _installed(name):
    """The file `name` this distribution installed into the scripts folder (with the command):
    where its record says, else in the `bin/` beside this package (`pip install --target`, whose
    record names places it did not install to)."""
    places = []
    try:
        files = metadata.distribution("streamsan").files or []
        places = [os.path.realpath(str(f.locate())) for f in files if str(f).endswith(f"bin/{name}")]
    except metadata.PackageNotFoundError:
        pass
    places.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin", name))
    return next((path for path in places if os.path.isfile(path)), None)


def command():
    """The `streamsan` command: the one this distribution installed, else the one on PATH."""
    return _installed("streamsan") or shutil.which("streamsan")


def shim_path():
    """The shim this distribution installed, beside the command (`streamsan run` finds it)."""
    return _installed("libstreamsan_shim.so")


class Shim:
    """The test API of the shim preloaded into this process (`streamsan_set_test`,
    `streamsan_test_races`: shim/include/streamsan.h)."""

    def __init__(self, lib):
        self._set = lib.streamsan_set_test
        self._set.argtypes, self._set.restype = [ctypes.c_char_p], None
        self._races = lib.streamsan_test_races
        self._races.argtypes, self._races.restype = [ctypes.c_char_p], ctypes.c_void_p
        self._free = lib.streamsan_free_report
        self._free.argtypes, self._free.restype = [ctypes.c_void_p], None

    @classmethod
    def preloaded(cls):
        """The shim's API, or None when the shim is not preloaded into this process."""
        try:
            return cls(ctypes.CDLL(None))
        except AttributeError:
            return None

    def set_test(self, name):
        """Calls from now on are made in the test `name` (None: in no test)."""
        self._set(None if name is None else name.encode())

    def races(self, name):
        """The races so far whose second operation was made in the test `name`, as streamsan
        prints them ("" for none)."""
        text = self._races(name.encode())
        if not text:
            return ""
        try:
            return ctypes.string_at(text).decode("utf-8", "replace")
        finally:
            self._free(text)
