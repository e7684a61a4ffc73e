"""Namespaces of its own for each program the harness runs (inside the sandbox; standard library only).

The harness (the judge: it reads the plan, collects each test's report and writes the verdict records) and the
programs it judges share the sandbox. So that no program can reach the judge, or leave anything for the next
program, each program runs like this (`run_isolated`, called in a child the harness forked for one test):

    harness ── fork ── C: unshare(mount, PID, IPC); fresh mounts (below) ── fork ── I: PID 1 of the new namespace
                                                                                    └─ fork ── the program

- **PID namespace**: the program sees, signals, traces and `prlimit`s only its own processes. The harness, the
  sandbox's init (which holds the harness's stdin and stdout), the other programs: none has a pid there.
- **No `/proc`**: an empty read-only file system lies over it. No `/proc/<pid>/fd` to reopen another process's
  pipes, no `/proc/self/mem` to read the process's own memory, however the path is spelled.
- **Fresh writable places**: `/tmp`, the working directory, the home directory (each a new size-capped tmpfs;
  read-only mounts below them, such as the Python installation, are bound again), `/dev` (read-only, with the
  usual device nodes and `/dev/stdin`, bound from a template the harness makes once, or made for the test where
  it has input; and a new size-capped `/dev/shm`). They live as long as the program's mount
  namespace: when its last process ends, the kernel frees them. Nothing one program writes is there for the next.
- **IPC namespace**: System V objects and POSIX message queues start empty and end with the program.
- **Keys**: a session keyring of its own; the harness empties the keyrings every process of the uid shares
  between programs (`clear_keyrings`).
- **No capabilities**: C and I need CAP_SYS_ADMIN to set this up (the harness alone is given it, with CAP_SETPCAP
  to empty the bounding set every process it forks inherits, `empty_bounding_set`); the program's process drops
  every other capability (effective, permitted, inheritable, ambient) and sets `no_new_privs` before it runs. It
  holds only the file descriptors its test gives it.

I, the namespace's init, closes every file descriptor, waits for the program and exits as it did; when I exits
the kernel kills whatever the program left in its namespace.
"""

import ctypes
import os
import signal

CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWIPC = 0x00020000, 0x20000000, 0x08000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x2000, 0x4000, 0x40000
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_READ, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 23, 24, 47, 4
PR_SET_DUMPABLE = 4
_KEYCTL_SYSCALL = {"x86_64": 250, "aarch64": 219}
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
# Written by C on its failure pipe (which only C holds: closed before anything of the program starts) when the
# namespaces cannot be made: the harness then reports the test as not judged (never run without them).
ISOLATION_FAILED = b"X"
# Written on the same pipe when a process of the judge could not be forked before the program started: a fault of
# the judge, and the program is judged again (`testing._judged_run`), never scored for it.
JUDGE_FAULT = b"F"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(result, what):
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _mount(source, target, fstype, flags, data=None):
    encode = lambda value: value.encode() if isinstance(value, str) else value  # noqa: E731
    _check(_libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)), f"mount {target}")


def available():
    """Whether this process may make the namespaces (it holds CAP_SYS_ADMIN): only the harness does."""
    try:
        with open("/proc/self/status", encoding="ascii") as file:
            for line in file:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 21))  # CAP_SYS_ADMIN
    except (OSError, ValueError):
        pass
    return False


_MOUNT_POINTS = []  # the harness's, read once (`remember_mount_points`): nothing mounts in its namespace later


def remember_mount_points():
    """Read the mount table once, in the harness, for every test process it forks (`_mount_points`)."""
    _MOUNT_POINTS[:] = _read_mount_points()


def _mount_points():
    """Every mount point this process sees (none without /proc): the harness's, read once when remembered."""
    return set(_MOUNT_POINTS) if _MOUNT_POINTS else _read_mount_points()


def _read_mount_points():
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as file:
            return {line.split()[4].encode().decode("unicode_escape") for line in file if len(line.split()) > 4}
    except OSError:
        return set()


def _mounts_below(directory, points):
    """Mount points strictly below `directory`, outermost first, of `points` (`_mount_points`)."""
    prefix = directory.rstrip("/") + "/"
    kept = []
    for point in sorted(p for p in points if p.startswith(prefix)):
        if not any(point.startswith(outer + "/") for outer in kept):
            kept.append(point)
    return kept


def _cover(directory, size, points):
    """A new, empty, size-capped tmpfs on `directory`; the mounts that were below it are bound again."""
    below = _mounts_below(directory, points)
    old = os.open(directory, os.O_PATH | os.O_DIRECTORY)
    try:
        _mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
        for point in below:
            relative = os.path.relpath(point, directory)
            os.makedirs(point, exist_ok=True)
            _mount(f"/proc/self/fd/{old}/{relative}", point, None, MS_BIND | MS_REC)
    finally:
        os.close(old)


def _fresh_dev(staging, size, stdin, move_to="/dev"):
    """A new read-only /dev holding the usual device nodes (bound from the old one), `/dev/stdin` (a file holding
    the test's input: there is no /proc for the usual link to it) and a new /dev/shm (with `size`; with 0, an
    empty directory). Made at `staging` and moved to `move_to` (None: left at `staging`)."""
    os.mkdir(staging)
    _mount("tmpfs", staging, "tmpfs", MS_NOSUID | MS_NOEXEC, f"size={(64 << 10) + len(stdin)},mode=755")
    for name in _DEVICES:
        if os.path.exists("/dev/" + name):
            open(os.path.join(staging, name), "w").close()
            _mount("/dev/" + name, os.path.join(staging, name), None, MS_BIND)
    with open(os.path.join(staging, "stdin"), "wb") as file:  # no /proc, so no /dev/stdin -> /proc/self/fd/0
        file.write(stdin)
    os.mkdir(os.path.join(staging, "shm"))
    if size:
        _mount("tmpfs", os.path.join(staging, "shm"), "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    _mount(None, staging, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    if move_to is not None:
        _mount(staging, move_to, None, MS_MOVE)
        os.rmdir(staging)


_DEV_TEMPLATE = "/tmp/.trl-ext-dev-template"
_DEV_TEMPLATE_MADE = [None]  # None until the harness tried (`make_dev_template`), then whether it made it


def make_dev_template():
    """Once, in a mount namespace of the harness's own: a read-only tmpfs at `_DEV_TEMPLATE` holding the usual
    device nodes (bound from /dev), an empty `stdin` and an empty `shm`. Each program's /dev is then bound from it
    with a new /dev/shm (`_dev_from_template`): two mounts per program instead of eleven. It lies in the harness's
    /tmp, which every program's own /tmp covers. Where it cannot be made, each program's /dev is made as before."""
    if _DEV_TEMPLATE_MADE[0] is not None:
        return
    _DEV_TEMPLATE_MADE[0] = False
    if not os.path.isdir("/tmp") or os.path.lexists(_DEV_TEMPLATE):
        return
    try:
        _check(_libc.unshare(CLONE_NEWNS), "unshare")  # a user namespace's process mounts only in its own
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        _fresh_dev(_DEV_TEMPLATE, 0, b"", move_to=None)
    except OSError:
        return
    _DEV_TEMPLATE_MADE[0] = True


def _dev_from_template(size):
    """/dev bound from the harness's template (read-only, as the template is), with a new /dev/shm of `size`."""
    _mount("tmpfs", _DEV_TEMPLATE + "/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=1777")
    _mount(_DEV_TEMPLATE, "/dev", None, MS_BIND | MS_REC)


def enter_namespaces(writable, size, keep_working_directory=False, stdin=b""):
    """Make this process's mount and IPC namespaces new (and its children's PID namespace), with fresh
    `writable` directories (except the working directory with `keep_working_directory`: the compiler writes
    its output there for the harness), a fresh /dev (its `stdin` a file holding `stdin`) and no /proc."""
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing mounted here propagates anywhere else
    working_directory = os.getcwd()
    covered = [d for d in writable if os.path.isdir(d) and d != "/dev/shm"]
    if keep_working_directory:
        covered = [d for d in covered if os.path.realpath(d) != os.path.realpath(working_directory)]
    from_template = _DEV_TEMPLATE_MADE[0] and not stdin and "/tmp" in covered
    if from_template:
        _dev_from_template(size)  # before /tmp, where the template lies, is covered
    points = [point for point in _mount_points() if not point.startswith(_DEV_TEMPLATE)]
    for directory in sorted(covered, key=len):
        _cover(directory, size, points)
    if not from_template:
        _fresh_dev("/tmp/.trl-ext-dev" if "/tmp" in covered else working_directory + "/.trl-ext-dev", size, stdin)
    _mount("tmpfs", "/proc", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=555")
    os.chdir(working_directory)  # the new tmpfs, not the directory it covers


def _bounding_set():
    """The capabilities in this process's bounding set (PR_CAPBSET_READ until EINVAL, past the last one the kernel
    knows). A bounding set only ever shrinks, and a forked process inherits it."""
    held = []
    for capability in range(64):
        answer = _libc.prctl(PR_CAPBSET_READ, capability, 0, 0, 0)
        if answer < 0:
            break
        if answer:
            held.append(capability)
    return held


_BOUNDING_SET = _bounding_set()


def empty_bounding_set():
    """Drop every capability from the harness's bounding set, once (it keeps those it holds: a bounding set limits
    what an `execve` or `capset` could add, and the harness adds none). Each process it forks for a program inherits
    the empty set, so `drop_capabilities` has nothing left to drop from it there: one call per capability fewer in
    each of them, where each call writes pages a forked process would otherwise not copy."""
    for capability in _BOUNDING_SET:
        _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)
    _BOUNDING_SET[:] = _bounding_set()


def drop_capabilities():
    """Give up every capability (bounding set, ambient, effective/permitted/inheritable), and any way back to one
    (`no_new_privs`: no setuid or file capability takes effect)."""
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for capability in _BOUNDING_SET:  # refused without CAP_SETPCAP: no capability is left to use it (below)
        _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)
    header, nothing = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3, all zero
    _check(_libc.capset(ctypes.byref(header), nothing), "capset")


def _close_all_descriptors():
    os.closerange(0, 1 << 16)


def _exit_code(status):
    """The shell's exit code for a wait status: the code, or 128 + the signal that killed it."""
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _exit_as(code):
    """Exit with `code`, or, for 129-192, be killed by that signal as the program was (a namespace's init cannot
    signal itself, so I passes the shell's code, and C, outside, turns it back into the signal)."""
    if 128 < code <= 128 + 64:
        try:
            signal.signal(code - 128, signal.SIG_DFL)
            os.kill(os.getpid(), code - 128)
        except (OSError, ValueError, RuntimeError):
            pass
    os._exit(code)


def _init(program_pid):
    """PID 1 of the program's namespace: hold nothing, wait for the program, exit as it did."""
    _close_all_descriptors()
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == program_pid:
            os._exit(_exit_code(status))  # and the kernel kills the rest of the namespace


def run_isolated(body, failure_fd, writable, size, keep_working_directory=False, stdin_fd=None, refuse_threads=None):
    """In a child the harness forked for one program: run `body()` (which never returns) in namespaces of its
    own, without capabilities, and exit as it did. Never returns. When the namespaces cannot be made, writes
    `ISOLATION_FAILED` and the reason on `failure_fd` and exits: no program runs without them. `failure_fd` is
    closed before the program starts, so a program cannot claim a failure of its own isolation. `stdin_fd`, a
    descriptor of the test's input, is replaced by `/dev/stdin`, the file holding the same input. `refuse_threads`
    (`one_thread.refuse_threads`, for a test that shares the program's process) is installed here, so that a
    kernel that cannot is a failure of the isolation, never the program's."""
    try:
        stdin = b""
        if stdin_fd is not None:
            stdin = os.pread(stdin_fd, os.fstat(stdin_fd).st_size, 0)
        enter_namespaces(writable, size, keep_working_directory, stdin)
        if stdin_fd is not None:
            reopened = os.open("/dev/stdin", os.O_RDONLY)
            os.dup2(reopened, stdin_fd, inheritable=False)
            os.close(reopened)
        if refuse_threads is not None:
            refuse_threads()
    except OSError as error:
        try:
            os.write(failure_fd, ISOLATION_FAILED + str(error).encode(errors="replace")[:200])
        finally:
            os._exit(71)
    init = fork_for_judge(failure_fd)
    if init == 0:
        try:
            program = fork_for_judge(failure_fd)
            if program == 0:
                try:
                    _keyctl(1, 0)  # KEYCTL_JOIN_SESSION_KEYRING: a new, empty session keyring of its own
                    drop_capabilities()
                except OSError as error:  # never runs with a capability
                    os.write(failure_fd, ISOLATION_FAILED + str(error).encode(errors="replace")[:200])
                    os._exit(71)
                os.close(failure_fd)
                body()
                os._exit(70)
            _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
            drop_capabilities()
            _init(program)
        finally:
            os._exit(70)
    _close_all_descriptors()
    _, status = os.waitpid(init, 0)
    _exit_as(_exit_code(status))


def become_subreaper():
    """PR_SET_CHILD_SUBREAPER: orphans of the harness's tests are the harness's to wait for, not the sandbox init's."""
    _libc.prctl(36, 1, 0, 0, 0)


def make_undumpable():
    """PR_SET_DUMPABLE 0: /proc/<harness>/{fd,mem} become inaccessible to the (capability-less) children."""
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def fork_for_judge(failure_fd):
    """`os.fork()` for a process of the judge, before the program runs. A fork the kernel refuses writes
    `JUDGE_FAULT` on `failure_fd` and exits: the program is judged again on a fresh sandbox (`testing._judged_run`),
    never scored for it. (Not retried here: the retries would eat into the test's time limit.)"""
    try:
        return os.fork()
    except OSError as error:
        try:
            os.write(failure_fd, JUDGE_FAULT + f"cannot fork: {error}".encode()[:200])
        finally:
            os._exit(72)


def _keyctl(*arguments):
    number = _KEYCTL_SYSCALL.get(os.uname().machine)
    return -1 if number is None else _libc.syscall(number, *(ctypes.c_long(value) for value in arguments))


def clear_keyrings():
    """Empty the keyrings every process of this uid in the sandbox shares, unlike its namespaces: the user's, the
    user's session keyring and the persistent one (each program also gets a session keyring of its own)."""
    for keyring in (-4, -5):  # KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING
        _keyctl(7, keyring)  # KEYCTL_CLEAR
    persistent = _keyctl(22, -1, 0)  # KEYCTL_GET_PERSISTENT for this uid, linked nowhere
    if persistent > 0:
        _keyctl(7, persistent)


def clean_up_between_programs(plan, private_pids, reap):
    """After each program of a reused sandbox: kill every other process (in a private PID namespace), empty the
    harness's scratch directories, remove System V IPC objects and empty the shared keyrings."""
    if private_pids:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        reap()
    if plan.get("isolation"):
        # Programs wrote only in places of their own, gone with them: what is left is the compiler's output in
        # the working directory, and the keyrings every process of the uid shares.
        _empty_directory(os.getcwd())
        clear_keyrings()
        return
    for directory in plan.get("scratch", ()):
        _empty_directory(directory)
    if plan.get("private_ipc"):
        _remove_ipc_objects()


def _empty_directory(directory):
    """Remove what programs left in `directory`; mount points (the read-only Python installation under a
    tmpfs home) and the directories leading to them stay."""
    import shutil

    def writable_and_retry(function, path, _):
        try:
            os.chmod(os.path.dirname(path), 0o700)
            os.chmod(path, 0o700)
            function(path)
        except OSError:
            pass

    mounts = _mount_points()
    keep = {os.path.dirname(mount) for mount in mounts}
    for mount in list(keep):
        while mount not in ("/", ""):
            keep.add(mount)
            mount = os.path.dirname(mount)
    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        path = os.path.join(os.path.abspath(directory), name)
        if path in mounts:
            continue
        if path in keep:
            _empty_directory(path)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, onerror=writable_and_retry)
        else:
            try:
                os.unlink(path)
            except OSError:
                writable_and_retry(os.unlink, path, None)


def _remove_ipc_objects():
    """Remove the System V shared memory, semaphores and message queues a program left (private IPC namespace)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except (OSError, ImportError):
        return
    for kind, remove in (("shm", libc.shmctl), ("sem", libc.semctl), ("msg", libc.msgctl)):
        try:
            with open(f"/proc/sysvipc/{kind}", encoding="utf-8") as file:
                lines = file.read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 1:
                identifier = int(fields[1])
                if kind == "sem":
                    remove(identifier, 0, 0)  # IPC_RMID = 0
                else:
                    remove(identifier, 0, None)
