"""Run a command as an unprivileged user with this machine's Python, for the sandbox tests and CI.

    python tests/sandbox/run_as_user.py [--no-userns] USER PYTHON ARGS...

PYTHON, and the current directory, may live where only root may enter (pyenv, a checkout under /root): the
command runs in a private mount namespace in which /root is an empty tmpfs holding only those two, so USER can
start it and sees nothing else of root's. With `--no-userns`, USER may not create user namespaces (`user.max_user_namespaces = 0`, set
in a user namespace of its own that maps every uid to itself), as on hosts that disable them. Run as root;
needs util-linux's `mount`. Exits with the command's status.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pwd
import subprocess
import sys
import tempfile

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
_IDENTITY_MAP = "0 0 4294967295\n"


def _expose_under_root(paths: list[str]) -> None:
    """Make `paths` (those under /root) reachable by any user: /root becomes an empty tmpfs holding only them."""
    paths = sorted({path for path in paths if path.startswith("/root/")})
    if not paths:
        return
    stashes = []
    for path in paths:
        stash = tempfile.mkdtemp(prefix="trl-ext-exposed-")
        subprocess.run(["mount", "--bind", path, stash], check=True)
        stashes.append(stash)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "trl-ext-root", "/root"], check=True)
    for path, stash in zip(paths, stashes):
        os.makedirs(path, exist_ok=True)
        subprocess.run(["mount", "--bind", stash, path], check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-userns", action="store_true", help="forbid the user to create user namespaces")
    parser.add_argument("user")
    parser.add_argument("python")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    account = pwd.getpwnam(options.user)
    identify = "import os, sys; print(sys.executable); print(os.path.realpath(sys.base_prefix))"
    python, prefix = subprocess.run(
        [options.python, "-c", identify], check=True, capture_output=True, text=True
    ).stdout.split("\n")[:2]
    libc = ctypes.CDLL(None, use_errno=True)
    ready_read, ready_write = os.pipe()
    go_read, go_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            flags = CLONE_NEWNS | (CLONE_NEWUSER if options.no_userns else 0)
            if libc.unshare(flags) != 0:
                raise OSError(ctypes.get_errno(), "unshare failed")
            os.write(ready_write, b"1")
            os.read(go_read, 1)  # the parent has written the uid/gid maps
            if options.no_userns:
                with open("/proc/sys/user/max_user_namespaces", "w") as file:
                    file.write("0")
            subprocess.run(["mount", "--make-rprivate", "/"], check=True)
            _expose_under_root([prefix, os.getcwd()])  # the interpreter, and a checkout under /root
            os.setgroups(os.getgrouplist(options.user, account.pw_gid))
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
            env = {**os.environ, "HOME": account.pw_dir, "USER": options.user, "LOGNAME": options.user}
            os.chdir(os.getcwd())
            os.execve(python, [python, *options.args], env)
        except BaseException as error:  # noqa: BLE001 - report and exit the child, never return into main
            print(f"run_as_user: {error}", file=sys.stderr)
            os._exit(125)
    os.read(ready_read, 1)
    if options.no_userns:
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as file:
                file.write(_IDENTITY_MAP)
    os.write(go_write, b"1")
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main())
