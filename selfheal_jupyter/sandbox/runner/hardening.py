"""What keeps the runner out of the program's reach: capabilities, non-dumpable
processes and a seccomp filter inherited by every process of the container."""

import ctypes
import ctypes.util
import platform

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
PR_SET_DUMPABLE = 4
PR_SET_KEEPCAPS = 8
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1
CAP_SETGID, CAP_SETUID = 6, 7
_CAPABILITY_VERSION_3 = 0x20080522
#: Syscalls no process in the sandbox may make: tracing or reading another process's
#: memory (the runner's), and System V / POSIX message-queue IPC objects (they would
#: outlive a run). By architecture: (audit arch, {name: number}).
DENIED_SYSCALLS = {
    "x86_64": (
        0xC000003E,
        {
            "ptrace": 101,
            "process_vm_readv": 310,
            "process_vm_writev": 311,
            "kcmp": 312,
            "pidfd_getfd": 438,
            "shmget": 29,
            "semget": 64,
            "msgget": 68,
            "mq_open": 240,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "ptrace": 117,
            "process_vm_readv": 270,
            "process_vm_writev": 271,
            "kcmp": 272,
            "pidfd_getfd": 438,
            "shmget": 194,
            "semget": 190,
            "msgget": 186,
            "mq_open": 180,
        },
    ),
}


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def set_dumpable(flag: bool) -> None:
    _libc.prctl(PR_SET_DUMPABLE, int(flag), 0, 0, 0)


def keep_capabilities(flag: bool) -> None:
    """Whether this process keeps its permitted capabilities when it leaves uid 0."""
    if _libc.prctl(PR_SET_KEEPCAPS, int(flag), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_KEEPCAPS) failed")


def set_capabilities(*caps: int) -> None:
    """Make ``caps`` this process's only effective and permitted capabilities (none: no
    ``caps``); none inheritable. Raises OSError when one of them is not permitted."""
    mask = 0
    for cap in caps:
        mask |= 1 << cap
    data = (_CapData * 2)()
    for i in range(2):
        word = (mask >> (32 * i)) & 0xFFFFFFFF
        data[i].effective = data[i].permitted = word
    if _libc.capset(ctypes.byref(_CapHeader(_CAPABILITY_VERSION_3, 0)), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def effective_capabilities() -> int:
    """This process's effective capabilities, as the kernel reports them."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def install_seccomp() -> str:
    """Deny DENIED_SYSCALLS with EPERM to this process and all it forks; '' or why not."""
    arch = DENIED_SYSCALLS.get(platform.machine())
    if arch is None:
        return f"no syscall filter for {platform.machine()}"
    audit_arch, numbers = arch
    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    jge = 0x35  # BPF_JMP|BPF_JGE|BPF_K
    deny = SECCOMP_RET_ERRNO | EPERM
    prog = [
        (ld, 0, 0, 4),
        (jeq, 1, 0, audit_arch),
        (ret, 0, 0, deny),
        (ld, 0, 0, 0),
        (jge, 0, 1, 0x40000000),
        (ret, 0, 0, deny),
    ]  # other ABIs and x32: denied
    for nr in sorted(numbers.values()):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, deny)]
    prog.append((ret, 0, 0, SECCOMP_RET_ALLOW))
    filters = (_SockFilter * len(prog))(*[_SockFilter(*ins) for ins in prog])
    fprog = _SockFprog(len(prog), filters)
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"no_new_privs failed (errno {ctypes.get_errno()})"
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        return f"seccomp failed (errno {ctypes.get_errno()})"
    return ""
