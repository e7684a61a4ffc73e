"""One thread in a test process that runs the program (inside the sandbox; standard library only).

A test that must run in the program's own process (it patches the program's modules, captures its output,
imports installed packages: see `harness`) shares the interpreter with the program. A thread of the program
would run beside the test machinery and could rewrite it while it decides (re-patching an assertion method between
two checks). `refuse_threads` installs a seccomp filter, enforced by the kernel and kept by every process the
program starts, under which no thread can be created: `clone` with `CLONE_THREAD`, or sharing the caller's memory
without `CLONE_VFORK`, fails with EAGAIN and `clone3` with ENOSYS (so C libraries fall back to `clone`). Python's
`threading` then raises `RuntimeError: can't start new thread`; `fork`, `vfork` and `subprocess` work as usual.
"""

import ctypes
import platform

# struct seccomp_data: nr at 0, arch at 4, args[0] at 16 (its low 32 bits: the clone flags, little-endian).
_ARCHES = {  # machine -> (AUDIT_ARCH_*, clone, clone3)
    "x86_64": (0xC000003E, 56, 435),
    "aarch64": (0xC00000B7, 220, 435),
}
_CLONE_VM, _CLONE_VFORK, _CLONE_THREAD = 0x100, 0x4000, 0x10000
_LOAD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EAGAIN, _ENOSYS = 11, 38
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def filter_program(arch, clone, clone3):
    """The BPF program, as (code, jt, jf, k) tuples (jumps are relative to the next instruction)."""
    return [
        (_LOAD, 0, 0, 4),                     # 0: arch
        (_JEQ, 0, 8, arch),                   # 1: another ABI -> 10 allow (its own syscall numbers)
        (_LOAD, 0, 0, 0),                     # 2: syscall number
        (_JGE, 7, 0, 0x40000000),             # 3: x32 syscalls -> 11 refuse
        (_JEQ, 7, 0, clone3),                 # 4: clone3 -> 12 ENOSYS
        (_JEQ, 0, 4, clone),                  # 5: not clone -> 10 allow
        (_LOAD, 0, 0, 16),                    # 6: clone's flags
        (_JSET, 3, 0, _CLONE_THREAD),         # 7: a thread -> 11 refuse
        (_JSET, 0, 1, _CLONE_VM),             # 8: a copy of the memory -> 10 allow
        (_JSET, 0, 1, _CLONE_VFORK),          # 9: shared memory: only a vfork (the parent waits) -> 10, else 11
        (_RET, 0, 0, _ALLOW),                 # 10
        (_RET, 0, 0, _ERRNO | _EAGAIN),       # 11
        (_RET, 0, 0, _ERRNO | _ENOSYS),       # 12
    ]


def refuse_threads():
    """Install the filter in this process (and every process it starts); raises OSError where the kernel or the
    architecture does not allow it, so that the caller can fail closed."""
    arch = _ARCHES.get(platform.machine())
    if arch is None:
        raise OSError(f"no seccomp filter for the architecture {platform.machine()!r}")
    instructions = filter_program(*arch)
    table = (_Instruction * len(instructions))(*(_Instruction(*entry) for entry in instructions))
    program = _Program(len(instructions), table)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(program), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
