"""How many CPU threads the embedded model gets, derived from the machine.

llama.cpp splits every matrix product across its threads and waits for the
slowest at each layer: a thread that the OS parks behind another process stalls
the whole token. So the rule counts the *physical* cores this process may run on
(hyper-threads share one core's arithmetic units) and subtracts the load that
other processes already put on them (the 1-minute load average):

- ``free = max(1, physical cores - round(load))``;
- prompt processing (``cpuparams_batch``: compute-bound, short bursts) gets every
  free core: ``batch = free``;
- generation (``cpuparams``: one token at a time, memory-bound, the long part of a
  reply) leaves one core to the rest of the machine (the kernel, the sandbox, other
  users) once three are free: ``generation = free - 1`` then, else ``free``;
- on a machine of at most two physical cores, generation gets 1 thread unless the
  machine is idle (load < 0.5): 2 threads there collapsed 3–10x whenever anything
  else ran (docs/ENVIRONMENT, measured again in bench/local_model.py).

Examples: busy 2-core box → 1 / 1; idle 2-core box → 2 / 2; 8-core laptop with a
browser (load 1) → 6 / 7; idle 8-core → 7 / 8.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ThreadCounts:
    generation: int
    batch: int


def physical_cores(cpus: set[int] | None = None, sys_cpu: Path = Path("/sys/devices/system/cpu")) -> int:
    """Physical cores among the CPUs this process may use (hyper-threads counted once)."""
    if cpus is None:
        try:
            cpus = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cpus = set(range(os.cpu_count() or 1))
    cores: set[tuple[str, str]] = set()
    for cpu in cpus:
        topo = sys_cpu / f"cpu{cpu}" / "topology"
        try:
            package = (topo / "physical_package_id").read_text().strip()
            core = (topo / "core_id").read_text().strip()
        except OSError:
            return max(1, len(cpus))  # no topology (not Linux, a container): count CPUs
        cores.add((package, core))
    return max(1, len(cores))


def machine_load() -> float:
    """1-minute load average (runnable processes), 0 where the OS has none."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def auto_threads(cores: int | None = None, load: float | None = None) -> ThreadCounts:
    """The rule of the module docstring."""
    cores = physical_cores() if cores is None else max(1, cores)
    load = machine_load() if load is None else max(0.0, load)
    free = max(1, cores - round(load))
    batch = free
    generation = (free if load < 0.5 else 1) if cores <= 2 else free - 1 if free >= 3 else free
    return ThreadCounts(generation=max(1, generation), batch=max(1, batch))


def resolve_threads(generation: int, batch: int) -> ThreadCounts:
    """The configured counts, with 0 meaning "from the machine" (each on its own)."""
    if generation > 0 and batch > 0:
        return ThreadCounts(generation, batch)
    auto = auto_threads()
    return ThreadCounts(generation if generation > 0 else auto.generation,
                        batch if batch > 0 else auto.batch)  # fmt: skip
