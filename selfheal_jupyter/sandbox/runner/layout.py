"""Where things are inside the container, and the descriptors of a run's processes."""

import os

WORKDIR_ROOT = "/tmp"
SHM_ROOT = "/dev/shm"
#: The engine's POSIX message-queue filesystem, a folder every uid may create in: a queue
#: made there with open() (mq_open is refused) would outlive its run, so the runner seals it.
MQUEUE_ROOT = "/dev/mqueue"
MPL_CACHE_DIR = "/opt/selfheal/matplotlib"  # a font cache made when the image was built
MPL_CONFIG_DIR = os.path.join(WORKDIR_ROOT, ".matplotlib")
#: Where put frames land: a tmpfs the host mounts when inputs travel as frames (in
#: socket mode it is the read-only bind mount, and no put arrives).
PUT_DIR = "/inputs"
PUT_FALLBACK_DIR = os.path.join(WORKDIR_ROOT, ".inputs")
#: The file names frames carry (the host's model.py has the same two: a unit test pins them).
CANDIDATE_FILE = "candidate.py"
NOTEBOOK_FILE = "<notebook>"
#: Descriptors of a run's processes after the set-up (0-2 are stdin/stdout/stderr).
FD_REQUEST, FD_REPORT, FD_RPC_OUT, FD_RPC_IN = 3, 4, 5, 6


def enter_workdir(workdir: str) -> None:
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)
