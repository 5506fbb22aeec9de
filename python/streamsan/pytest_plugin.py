"""`pytest --streamsan`: the session runs under streamsan, and each race fails the test that
was running when its second operation was made, with the race as the test's error.

A session not yet under the shim starts again under `streamsan run` (the same interpreter,
`python -m pytest` with the same arguments, in the same directory); its workers (pytest-xdist)
inherit the preloaded shim. Each test is named to the shim at its setup, and its races are
asked for after each of its phases.
"""

import os
import re
import shlex
import sys

import pytest

from . import Shim, command

# Set in the environment of the session this plugin started under `streamsan run`: if the shim
# is still not preloaded there, starting again would loop.
STARTED = "STREAMSAN_PYTEST"

# One race as streamsan prints it, between two rules (a test's error shows what is inside).
RACE = re.compile(r"^={18}\n(.*?)^={18}\n", re.S | re.M)


def pytest_addoption(parser):
    group = parser.getgroup("streamsan", "stream-order races of CUDA programs (streamsan)")
    group.addoption(
        "--streamsan",
        action="store_true",
        help="run the session under streamsan: a race fails the test that made its second operation",
    )
    group.addoption(
        "--streamsan-args",
        default="",
        metavar="ARGS",
        help='options of `streamsan run` for the session, e.g. "--footprint exact --report r.%%p.json"',
    )


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    if not config.getoption("streamsan") or Shim.preloaded() is not None:
        return None
    if os.environ.get(STARTED):
        raise pytest.UsageError(
            "streamsan: the session runs under `streamsan run`, but the shim is not preloaded "
            "into this interpreter (is it statically linked, or setuid?)"
        )
    streamsan = command()
    if streamsan is None:
        raise pytest.UsageError("streamsan: cannot find the streamsan command (pip install the streamsan wheel)")
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
    sys.stdout.flush()
    sys.stderr.flush()
    params = config.invocation_params
    run = [streamsan, "run", *shlex.split(config.getoption("streamsan_args")), "--"]
    os.chdir(params.dir)
    os.execve(streamsan, [*run, sys.executable, "-m", "pytest", *params.args], {**os.environ, STARTED: "1"})


def pytest_configure(config):
    if config.getoption("streamsan"):
        shim = Shim.preloaded()
        if shim is not None:
            config.pluginmanager.register(RacesByTest(shim), "streamsan-test-races")


class RacesByTest:
    """Names each test to the shim, and fails it with the races its operations exposed."""

    def __init__(self, shim):
        self.shim = shim
        # Races already reported, by test: a phase reports those found since.
        self.reported = {}

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        self.shim.set_test(item.nodeid)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when == "teardown":
            self.shim.set_test(None)
        races = RACE.findall(self.shim.races(item.nodeid))
        new = races[self.reported.get(item.nodeid, 0) :]
        self.reported[item.nodeid] = len(races)
        if new:
            fail(report, "\n".join(new))


def fail(report, races):
    """Fails a phase's report with `races`; a phase failed already keeps its error first."""
    if report.failed:
        report.sections.append(("streamsan: races", races))
        return
    report.outcome = "failed"
    report.longrepr = races
