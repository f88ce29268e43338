"""The runner: the fork server that runs inside each sandbox container, as its PID 1.

Why a fork server: starting Python and importing pandas costs ~0.5 s and a container
~0.4 s more. This process pays both once; every candidate then starts as a fork.

Three kinds of process, and why each exists (the candidate is hostile):

* **server** (PID 1): talks to the host and decides the verdict. The container starts
  it as root with CAP_SETUID and CAP_SETGID only; it becomes uid 65534 at once, keeping
  just those two, to hand each run uids of its own (``principals``). As PID 1 it gets
  no signal it has no handler for, it is not dumpable, and a seccomp filter denies
  ``ptrace`` and ``process_vm_*`` to every process in the container. It has seen every
  request, so nothing is ever forked from it after the start.
* **template**: forked once, right after the preload, before any request exists. It
  forks the processes of every run, so each starts from a state that never held
  another run's code, data or output; it reaps them and reports their real exit status
  to the server.
* per run, the **candidate** (runs the program as the real ``__main__``, with
  Python's own exit, thread and ``atexit`` semantics) and, when there are tests or the
  user's asserts to check, the **checker**: a separate, non-dumpable process that runs
  them. It trusts only data (``codec``, ``checker_rpc``): what the program answers over
  the JSON RPC is plain data the checker rebuilds (a class by a name of the fixed
  ``type_table``), or an opaque handle; nothing the program sends makes it load a
  class or module; comparisons and operators with
  a test's value are computed in the checker; builtins and libraries are its own, and
  which names come from the program is read from the sources (``checker``). The user's
  top-level asserts are run there too, while the candidate waits at each.

Each run's candidate and checker are two fresh uids (never used before in the
container), with no capability under no_new_privs: the kernel refuses them any
signal, ``ptrace`` or ``/proc/PID/{mem,fd,environ,...}`` of the server, the templates,
the other template's idle candidate and each other. A run ends with ``kill(-1,
SIGKILL)`` as its uids (it reaches all they own, in any state, and nothing else); the
server waits until none of their processes is left, then removes what they wrote, as
their owner, before it answers (``sweep``); a container where anything but the runner's
own entries is left is replaced. What no wipe covers, no run may write: the engine's
``/dev/mqueue`` (a message queue made there with open() would outlive its run) is made
root's alone before the server leaves root, as are the files ``--seal`` names.

Status and exit code come from the candidate's wait status as the template saw it
(``oom``: the OOM kill, or the builtin MemoryError class itself); what the candidate
itself reports (error details, figures) is description only.

Protocol with the host: frames of a 4-byte big-endian length and UTF-8 JSON, over the
unix socket ``--control PATH`` when it can be reached (a local engine), else over
stdin/stdout, i.e. the container's attach stream (any Docker-API engine). The server
sends ``{"ready": true, ...}`` (with ``--await-host``, only in answer to each
``{"op": "hello", "n": N}``, naming its ``n``: Kubernetes' attach stream drops what was
written before it joined; with ``--hello-within S`` it exits when no frame came within S
seconds, as no host attached), then one result frame per ``{"op": "run"}``;
``{"op": "put"}`` frames carry input files when there is no shared directory;
``{"op": "cancel"}`` stops a run; EOF ends the server. Nothing is pickled on the way
out. Standard library only; numpy / pandas / matplotlib are preloaded when present.

The image ships this folder as ``/opt/selfheal/selfheal_runner/`` and starts it by the
path of ``__main__.py``. Its modules, each with one job:

* ``server``: PID 1; the host's frames in and out, the templates, one run, ``main``.
* ``template``: the templates: fork each run's candidate and checker, reap.
* ``candidate``: the program as ``python3 FILE`` runs it, then its report.
* ``checker``: the user's asserts where they stand, then the tests one statement at a
  time, against the program's names (the rule of where each name comes from).
* ``program_rpc`` / ``checker_rpc``: the two ends of the RPC between them.
* ``outlived``: an assert that held fails when a callable it read is bound again
  before the program ends by no statement the spec guard reads (identity of the
  checker's handles).
* ``codec``: values and exceptions as tagged JSON across that RPC (the trust rules:
  ``CheckerCodec`` and ``ProgramCodec``, one per side).
* ``type_table``: the classes that cross by name (builtins, the standard library's,
  numpy's and pandas'), one fixed table frozen in each template before any program.
* ``frames``: the length-prefixed JSON frames every channel carries.
* ``outcome``: a run's result from what the server observed.
* ``describe``: what a candidate says about itself (errors, values, figures).
* ``principals``: who runs as whom; ending every process of a run's uids.
* ``sweep``: removing what a run wrote, as its owner.
* ``watch``: what a run tried beyond its folder (network, processes, files), seen
  from outside its processes by the kernel's counters and events.
* ``hardening``: capabilities, non-dumpable processes and the seccomp filter.
* ``libraries``: the preload, matplotlib's environment, which template a run needs.
* ``memory``: /proc and cgroup memory counters. ``layout``: paths and descriptors.

Nothing of the host package is imported: the folder is copied alone into the image,
under another name. Its modules import each other relatively and only at the top, so
all of them are loaded at start-up: once a candidate has taken ``sys.path[0]`` and
dropped them from ``sys.modules``, no runner module could be found again.
"""
