"""The warm pool and one run, whatever the sandbox's workers are.

A backend (``docker.py``: containers; ``kubernetes.py``: pods) starts a hardened worker
running the runner, hands over a :class:`~.worker.Link` to its frames and removes it;
:class:`PooledSandbox` keeps workers warm, runs each candidate on one and retires it
when the run leaves it unfit. Written once for every backend, so that what a run is
(inputs, request, backstop, cancel, a dirty or crashed worker) cannot differ between them.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ..errors import EngineLost, SandboxError
from ..model import CANDIDATE_FILE, ExecutionResult, Limits, Status
from ..result_json import read_result
from . import serialize
from .worker import ContainerSpec, Link, SandboxCrashed

#: Seconds the host waits past the candidate's own timeout before it kills the worker.
BACKSTOP_GRACE_S = 5.0
#: Seconds a cancelled run may take to report before its worker is killed.
CANCEL_GRACE_S = 0.5
#: Where put frames land in a worker (a tmpfs of its own).
INPUTS_MOUNT = "/inputs"


def engine_calls(method: Callable[..., Any]) -> Callable[..., Any]:
    """An engine that stops answering at any step of ``method`` becomes one
    :class:`~selfheal_jupyter.errors.EngineLost` message (the backend's
    :meth:`PooledSandbox._lost` says which failures are that), and the pool is dropped
    so that the next run after the engine is back starts new workers."""

    @functools.wraps(method)
    def call(self: PooledSandbox, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except EngineLost:
            self._drop_pool()
            raise
        except Exception as exc:
            lost = self._lost(exc)
            if lost is None:
                raise
            self._drop_pool()
            raise lost from exc

    return call


_LIVE: weakref.WeakSet[PooledSandbox] = weakref.WeakSet()
_Self = TypeVar("_Self", bound="PooledSandbox")


@atexit.register
def _close_all() -> None:
    for sandbox in list(_LIVE):
        with contextlib.suppress(Exception):
            sandbox.close()


class PooledSandbox:
    """Candidates run on warm workers; a backend says how a worker starts and ends."""

    #: What a worker is, in messages ("container", "pod").
    unit = "worker"

    def __init__(self, *, limits: Limits, pool_size: int, session: str | None = None) -> None:
        self.limits = limits
        self.pool_size = max(0, pool_size)
        self.session = session or uuid.uuid4().hex[:12]
        self._lock = threading.RLock()
        self._idle: dict[ContainerSpec, list[Link]] = {}
        self._pending: dict[ContainerSpec, list[Future[Link]]] = {}
        self._all: set[Link] = set()
        self._created: set[str] = set()  # worker names, for cleanup even mid-start
        self._executor: ThreadPoolExecutor | None = None
        self._started = False
        self._closed = False
        self.backstop_grace_s = BACKSTOP_GRACE_S

    # -- what a backend provides -------------------------------------------------
    def _prepare(self) -> None:
        """Before the first worker: check the engine and the image, sweep stale workers."""
        raise NotImplementedError

    def _create(self, spec: ContainerSpec) -> Link:
        """Start one hardened worker and wait until its runner is ready."""
        raise NotImplementedError

    def _crashed(self, worker: Link, exc: SandboxCrashed, limits: Limits) -> ExecutionResult:
        """The worker died under the candidate: what to report (or raise)."""
        raise NotImplementedError

    def _lost(self, exc: BaseException) -> EngineLost | None:
        """The error to raise when ``exc`` means the engine stopped answering, else None."""
        return None

    def _remove_leftovers(self) -> None:
        """At close: remove what was created but never handed over, and wait until the
        engine lists none of this sandbox's workers."""

    def _deliver(
        self, worker: Link, blobs: Mapping[str, bytes], spec: ContainerSpec
    ) -> tuple[dict[str, str], str | None]:
        """The inputs into the worker: as put frames into its tmpfs (``{name: file}``,
        and the folder the runner reads them from: None = where the puts land)."""
        fits_in_memory(blobs, spec, self.unit)
        files = {name: f"input{i}.pkl" for i, name in enumerate(blobs)}
        for name, blob in blobs.items():
            worker.put(files[name], blob)
        return files, None

    def _after_run(self, worker: Link) -> None:
        """After a result, before the worker goes back to the pool."""

    # -- lifecycle -------------------------------------------------------------
    @engine_calls
    def start(self) -> None:
        """Check the engine and image, remove stale workers, warm the pool."""
        with self._lock:
            if self._closed:
                raise SandboxError(f"This sandbox was closed; create a new {type(self).__name__} to run more code.")
            if self._started:
                return
            self._prepare()
            self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="selfheal-pool")
            self._started = True
            _LIVE.add(self)
        spec = ContainerSpec.of(self.limits)
        if self.pool_size:
            worker = self._create(spec)  # synchronously: a broken image shows up here
            self._release(worker)
            self._refill(spec)

    def close(self) -> None:
        """Remove every worker of this sandbox (idempotent)."""
        with self._lock:
            self._closed = True
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
            pending = [f for fs in self._pending.values() for f in fs]
            self._pending.clear()
            executor, self._executor = self._executor, None
        for fut in pending:
            fut.cancel()
        if executor is not None:
            executor.shutdown(wait=True, cancel_futures=True)
        with self._lock:  # workers finished while shutting down
            workers += list(self._all)
            self._all.clear()
            self._idle.clear()
        threads = [threading.Thread(target=w.kill, daemon=True) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=15)
        self._remove_leftovers()
        _LIVE.discard(self)

    def __enter__(self: _Self) -> _Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the pool --------------------------------------------------------------
    def _drop_pool(self) -> None:
        """The engine went away and its workers with it: forget every one (their
        removal is tried in the background and again by :meth:`close`)."""
        with self._lock:
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
        for worker in workers:
            threading.Thread(target=worker.kill, daemon=True, name="selfheal-kill").start()

    def _discard(self, worker: Link) -> None:
        with self._lock:
            self._all.discard(worker)
        worker.kill()
        self._created.discard(worker.name)

    def _keep(self, spec: ContainerSpec) -> int:
        """How many workers of ``spec`` stay alive between runs."""
        return self.pool_size if spec == ContainerSpec.of(self.limits) else 1

    def _live(self, spec: ContainerSpec) -> int:
        """Workers of ``spec`` alive now, idle or busy (call with the lock held)."""
        return sum(1 for w in self._all if w.spec == spec and not w.dead)

    def _release(self, worker: Link) -> None:
        """Back to the pool, or away if the pool already holds enough of its kind.

        Of the limits other than the pool's own, one worker is kept idle, of the latest
        ones: a request may lower its limits (a student's ``%%heal --memory``), and a
        worker kept for each size asked would let one user hold any number of containers
        or pods (on Kubernetes, each with its memory reserved) until the sandbox closes.
        """
        own = ContainerSpec.of(self.limits)
        away = [worker]
        with self._lock:
            if not self._closed and not worker.dead and self._live(worker.spec) <= self._keep(worker.spec):
                away = []
                if worker.spec != own:
                    for spec in [s for s in self._idle if s not in (own, worker.spec)]:
                        away += self._idle.pop(spec)
                self._idle.setdefault(worker.spec, []).append(worker)
        for gone in away:
            self._discard(gone)

    def _refill(self, spec: ContainerSpec) -> None:
        """Start workers in the background until the pool for ``spec`` is full.

        Busy workers count: a pool of 1 used sequentially keeps exactly one worker.
        """
        if spec != ContainerSpec.of(self.limits):
            return
        with self._lock:
            if self._closed or self._executor is None:
                return
            have = self._live(spec) + len(self._pending.get(spec, []))
            for _ in range(self.pool_size - have):
                fut = self._executor.submit(self._create, spec)
                self._pending.setdefault(spec, []).append(fut)
                fut.add_done_callback(functools.partial(self._arrived, spec))

    def _arrived(self, spec: ContainerSpec, fut: Future[Link]) -> None:
        with self._lock:
            pending = self._pending.get(spec, [])
            if fut not in pending:
                return  # somebody took it over in _acquire
            pending.remove(fut)
        if fut.cancelled() or fut.exception() is not None:
            return
        self._release(fut.result())

    def _acquire(self, spec: ContainerSpec) -> Link:
        """An idle worker, else one being started, else a new one (all of ``spec``)."""
        with self._lock:
            idle = self._idle.get(spec)
            while idle:
                # The longest idle first: the one that just ran is still forking its next
                # child, so with a pool of 2, back-to-back runs alternate and never wait.
                worker = idle.pop(0)
                if worker.alive():
                    return worker
                self._all.discard(worker)  # its container or pod went away while idle
                threading.Thread(target=worker.kill, daemon=True, name="selfheal-kill").start()
            pending = self._pending.get(spec)
            fut = pending.pop(0) if pending else None
        if fut is not None:
            try:
                return fut.result()
            except Exception:
                pass
        return self._create(spec)

    # -- running ---------------------------------------------------------------
    @engine_calls
    def execute(
        self,
        code: str,
        *,
        inputs: Mapping[str, Any] | None = None,
        limits: Limits | None = None,
        tests: str | None = None,
        cancel: threading.Event | None = None,
        filename: str = CANDIDATE_FILE,
        prelude: str | None = None,
        asserts: Sequence[tuple[int, int, str]] | None = None,
    ) -> ExecutionResult:
        """Run ``code`` in a warm worker; see :class:`~.base.Sandbox`."""
        if not self._started:
            self.start()
        limits = limits or self.limits
        started = time.monotonic()
        if cancel is not None and cancel.is_set():
            return ExecutionResult(status="killed", message="Cancelled before it started.")
        spec = ContainerSpec.of(limits)
        blobs = serialize.dump_all(inputs or {})  # BadInput before any worker is touched
        worker = self._acquire(spec)
        started = time.monotonic()  # duration_s is the run, not the worker's start
        try:
            files, inputs_dir = self._deliver(worker, blobs, spec)
            request = {
                "op": "run",
                "code": code,
                "prelude": prelude or None,
                "tests": tests,
                "asserts": [list(item) for item in asserts or ()],
                "filename": filename,
                "inputs": files,
                "inputs_dir": inputs_dir,
                "timeout_s": limits.timeout_s,
                "output_bytes": limits.output_bytes,
            }
            worker.send(request)
            worker.runs += 1
            frame = self._wait(worker, limits, cancel)
        except SandboxCrashed as exc:
            result = self._crashed(worker, exc, limits)
            self._discard(worker)
            self._refill(spec)
            result.duration_s = time.monotonic() - started
            return result
        except BaseException:
            # KeyboardInterrupt, BadInput...: the worker may be mid-run; never reuse it.
            self._discard(worker)
            self._refill(spec)
            raise
        if frame is None:  # the backstop or a cancel the runner did not answer
            status: Status = "killed" if cancel is not None and cancel.is_set() else "timeout"
            self._discard(worker)
            self._refill(spec)
            return ExecutionResult(
                status=status,
                exit_code=137,
                duration_s=time.monotonic() - started,
                message=(
                    f"The run was cancelled and its {self.unit} was stopped."
                    if status == "killed"
                    else f"The program did not finish within {limits.timeout_s:g} s and its "
                    f"{self.unit} had to be stopped. Look for an endless loop or raise the timeout."
                ),
            )
        self._after_run(worker)
        result = read_result(frame)  # validated: never raises
        dirty = not isinstance(frame, dict) or frame.get("dirty", False) is not False
        if result.is_malformed or dirty:
            # Not the runner we know, or it could not clean up: the next candidate gets
            # a fresh worker.
            self._discard(worker)
            self._refill(spec)
        else:
            self._release(worker)
        result.duration_s = time.monotonic() - started
        return result

    def _wait(self, worker: Link, limits: Limits, cancel: threading.Event | None) -> dict[str, Any] | None:
        """The result frame; None when the backstop or an unanswered cancel fired."""
        deadline = time.monotonic() + limits.timeout_s + self.backstop_grace_s
        cancel_deadline: float | None = None
        while True:
            now = time.monotonic()
            if cancel is not None and cancel.is_set() and cancel_deadline is None:
                worker.send({"op": "cancel"})
                cancel_deadline = now + CANCEL_GRACE_S
            end = min(deadline, cancel_deadline or deadline)
            if now >= end:
                return None
            step = end - now if cancel is None or cancel_deadline else min(end - now, 0.05)
            frame = worker.poll(step)
            if frame is not None:
                return frame


def fits_in_memory(blobs: Mapping[str, bytes], spec: ContainerSpec, unit: str) -> None:
    """Inputs sent as frames live in the worker's memory twice (file and value)."""
    size = sum(len(b) for b in blobs.values())
    if size > spec.memory_bytes // 2:
        raise SandboxError(
            f"The inputs ({size / 1e6:.0f} MB pickled) do not fit this sandbox: on an engine "
            f"that does not share this machine's files they are copied into the {unit}'s "
            f"memory (limit {spec.memory}) and loaded there, so they may use at most half "
            "of it. Raise the memory limit (`%config SelfHeal.memory`) or pass smaller inputs."
        )
