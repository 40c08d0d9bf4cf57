"""Fixtures for the OpenLake integration suite.

Run with:  /usr/bin/python3 -m pytest tests/integration
(OPENLAKE_BIN may name the binary or its build directory; OPENLAKE_LOG_LEVEL
passes --log-level; OPENLAKE_KEEP_DATA keeps the data directories.)

A module may set SERVER_CONFIG (a dict or a list of (name, value) pairs) to
configure the module-scoped `server`.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import helpers  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: moves hundreds of MiB (deselect with -m 'not slow')")
    config.addinivalue_line("markers", "both_modes: in a ONE_MODE module, runs in every mode")


def pytest_collection_modifyitems(config, items):
    # A module that sets ONE_MODE = True tests a third-party client's own
    # requests (the aws CLI, s3cmd, rclone, s3fs): what differs between the
    # modes is the object layer under the handlers, which the boto3 and raw
    # HTTP files cover in every mode.  Its tests on the plain `server` run in
    # the first of TEST_MODES only, except those marked both_modes (the
    # ones that move multipart data or copy, where the erasure-coded path
    # differs).  Each client invocation costs seconds, so this halves the
    # slowest files of the suite.
    keep, drop = [], []
    for item in items:
        cs = getattr(item, "callspec", None)
        mode = cs.params.get("server") if cs else None
        if (mode is not None and mode != TEST_MODES[0]
                and getattr(item.module, "ONE_MODE", False)
                and item.get_closest_marker("both_modes") is None):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # On a failure, attach the tail of each running server's log: the
    # server's side of the story is usually what explains it.
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for srv in list(helpers.LIVE_SERVERS):
            rep.sections.append((f"openlake log {srv.workdir.name}", srv.log_tail(80)))


def _serve(srv):
    """Starts srv and yields it to a fixture's tests, then closes it."""
    srv.start()
    try:
        yield srv
    finally:
        srv.close()


def _fresh_bucket(s3):
    name = helpers.unique_bucket()
    s3.create_bucket(Bucket=name)
    return name


# The modes the plain `server` fixture runs every test module in: one drive
# ("sd") and six erasure-coded drives, 4+2 ("ec").  OPENLAKE_TEST_MODES=sd (or
# ec) runs one of them.
TEST_MODES = [m for m in os.environ.get("OPENLAKE_TEST_MODES", "sd,ec").split(",") if m]


@pytest.fixture(scope="module", params=TEST_MODES)
def server(tmp_path_factory, request):
    """One server per test module and mode, with fresh data directories: every
    test that takes `server` (or `s3`, `bucket`) runs against one drive and
    against erasure-coded drives.  srv.mode says which."""
    config = getattr(request.module, "SERVER_CONFIG", None)
    mode = request.param
    if mode == "sd":
        srv = helpers.Server(tmp_path_factory.mktemp("srv"), config=config)
    else:
        srv = helpers.make_mode_server(mode, tmp_path_factory.mktemp(mode), config=config)
    srv.mode = mode
    yield from _serve(srv)


@pytest.fixture
def make_server(tmp_path_factory):
    """Factory for servers private to one test: make_server(config=...,
    mode="sd" or "ec")."""
    servers = []

    def make(config=None, start=True, mode="sd", **kw):
        srv = helpers.make_mode_server(mode, tmp_path_factory.mktemp(mode), config=config,
                                       **kw)
        srv.mode = mode
        servers.append(srv)
        if start:
            srv.start()
        return srv

    yield make
    errors = []
    for srv in servers:
        try:
            srv.close()
        except AssertionError as e:
            errors.append(str(e))
    if errors:
        raise AssertionError("\n\n".join(errors))


@pytest.fixture(scope="module", params=["sd", "ec"])
def mode_server(tmp_path_factory, request):
    """One server per test module and mode: the module's tests run once against
    one drive ("sd") and once against six erasure-coded drives ("ec").
    srv.mode says which.  A module may set SERVER_CONFIG as for `server`."""
    config = getattr(request.module, "SERVER_CONFIG", None)
    srv = helpers.make_mode_server(request.param, tmp_path_factory.mktemp(request.param),
                                   config=config)
    srv.mode = request.param
    yield from _serve(srv)


@pytest.fixture(scope="module")
def mode_s3(mode_server):
    return helpers.make_client(mode_server.endpoint)


@pytest.fixture
def mode_bucket(mode_s3):
    """A fresh, empty bucket on the module's mode_server."""
    return _fresh_bucket(mode_s3)


@pytest.fixture(scope="module")
def s3(server):
    return helpers.make_client(server.endpoint)


@pytest.fixture
def bucket(s3):
    """A fresh, empty bucket on the module's server."""
    return _fresh_bucket(s3)
