"""What the kernel says about memory: /proc and cgroup counters."""


def read_kv(path: str) -> dict:
    out: dict = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[-1].isdigit():
                    out[parts[0].rstrip(":")] = int(parts[-1])
    except OSError:
        pass
    return out


def oom_kills() -> int:
    """How many processes the kernel OOM killer killed in this container's cgroup."""
    v1 = read_kv("/sys/fs/cgroup/memory/memory.oom_control")
    if "oom_kill" in v1:
        return v1["oom_kill"]
    return read_kv("/sys/fs/cgroup/memory.events").get("oom_kill", 0)
