"""The MCP server: four tools and the records of their runs, on the official Python SDK.

Each tool call is one piece of work in a worker thread, holding a turn of a fair queue
(:mod:`selfheal_jupyter.service.queue`: in a class one call per student at a time, the
students in turn; on this machine ``service_runs`` at once), with a bounded number
waiting, so no client can fill the server. A call the client cancels, or whose client goes away (a
closed stdin, a closed HTTP stream), sets the work's stop signal: the sandbox run is
killed and a heal's own containers are removed before the call ends. Where the work
runs and who asks is the :class:`Host`'s (this machine, or the class service).
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, TypeVar

import anyio
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, ImageContent, ResourceLink, TextContent, ToolAnnotations
from pydantic import Field, JsonValue
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config import SelfHeal
from ..errors import SelfHealError
from ..loop.events import VerdictReady
from ..render.terminal import printable
from ..teaching.policy import Gate, Policy
from . import admission, work
from .shapes import CheckShape, ExplanationShape, RunRecord, SandboxResult

T = TypeVar("T")
RECORDS_KEPT = 16
"""Run records each asker can read back (``selfheal://runs/{id}``); older ones are dropped."""
RECORD_URI = "selfheal://runs/{run_id}"

INSTRUCTIONS = """\
Run Python in a hardened sandbox (no network, no host files, no secrets), never in the \
user's kernel: run_code. Before you hand a fix to the user, check it: check_fix judges \
your candidate against the user's own program exactly as selfheal's loop does (the \
user's asserts and tests, the spec guard that refuses a weakened assert, behaviour) and \
hands over the smallest passing change with what it newly can do (network, processes, \
files...). heal runs selfheal's own loop on the program; explain_failure says why a \
program fails without any model."""


@dataclass
class Records:
    """One asker's run records, by random id: no other asker's store is ever consulted."""

    kept: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)

    def add(self, record: dict[str, Any]) -> str:
        run_id = secrets.token_hex(16)
        self.kept[run_id] = record
        while len(self.kept) > RECORDS_KEPT:
            self.kept.popitem(last=False)
        return run_id


@dataclass
class Principal:
    """Who asks: a name for the fair queue, the policy that holds for them, the parts
    their tools use, and their records."""

    name: str
    policy: Policy
    bench: work.Workbench
    records: Records
    gate: Gate | None = None
    """The process's gate (``max_runs`` counted per process) where the policy is this
    process's; None where the host counts runs itself."""


class Host(Protocol):
    """Where the work runs and who asks (:mod:`.local` or the class service)."""

    settings: SelfHeal

    async def principal(self, ctx: Context) -> Principal: ...

    def turn(self, principal: Principal) -> AbstractAsyncContextManager[None]:
        """Wait for the asker's turn of the fair queue; raise ``BadInput`` when they have
        too many calls waiting."""
        ...

    def heal(self, principal: Principal, request: HealRequest, emit: work.Emit, cancel: threading.Event) -> Any:
        """The heal's :class:`~selfheal_jupyter.model.Run`, admitted by the host's rules."""
        ...


@dataclass(frozen=True)
class HealRequest:
    code: str
    tests: str | None
    task: str
    max_iterations: int | None


# --------------------------------------------------------------------------- threads
async def in_thread(fn: Callable[[threading.Event], T]) -> T:
    """``fn(cancel)`` in a worker thread; when this call is cancelled (the client said so,
    or went away) ``cancel`` is set and the call ends only once ``fn`` has returned, so
    nothing of it (a container, a process) outlives the call."""
    cancel, done = threading.Event(), anyio.Event()

    async def watch() -> None:
        try:
            await done.wait()
        finally:
            cancel.set()

    return await alongside(watch, anyio.to_thread.run_sync(fn, cancel), done.set)


async def alongside(task: Callable[[], Coroutine[Any, Any, None]], work: Awaitable[T], end: Callable[[], None]) -> T:
    """``work`` with ``task`` running beside it; ``end()`` (which ends ``task``) once work
    is over. Its exception comes out as itself (a task group would wrap it in a group,
    which the SDK reports as a crash without its message)."""
    outcome: list[Any] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(task)
        try:
            outcome.append(await work)
        except Exception as exc:
            outcome.append(exc)
        finally:
            end()
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0]


GONE = "selfheal.gone"
"""Where an HTTP request's ASGI scope holds the event that is set when its client went away."""


def stopping_when_gone(app: ASGIApp) -> ASGIApp:
    """The SDK's streamable HTTP ``app``, each request's scope holding an event (:data:`GONE`)
    set when its connection closes. The SDK keeps a call going when the stream that
    carries it closes, for a client that may resume it from an event store; this server
    keeps none, so nobody would ever read the result, while a heal held its containers,
    the model and a turn of the queue for up to ``time_budget_s``: :func:`unless_gone`
    stops it."""

    async def watched(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        gone = scope[GONE] = anyio.Event()

        async def hearing() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                gone.set()
            return message

        await app(scope, hearing, send)

    return watched


async def unless_gone(ctx: Context, work: Callable[[], Awaitable[T]]) -> T:
    """``work()``, cancelled (its turn withdrawn, its run stopped) when the client of the
    HTTP request that carries this call went away (:func:`stopping_when_gone`)."""
    request = ctx.request_context.request
    gone = getattr(request, "scope", {}).get(GONE)
    if gone is None:  # stdio: a closed stdin ends the server, and every call with it
        return await work()
    watching = anyio.CancelScope()

    async def watch() -> None:
        with watching:
            await gone.wait()
            stopped.cancel()

    with anyio.CancelScope() as stopped:
        return await alongside(watch, work(), watching.cancel)
    raise ToolError("The client went away: the call was stopped.")


class Progress:
    """Loop events from the worker thread → MCP progress notifications, one per attempt."""

    def __init__(self, ctx: Context, total: int) -> None:
        self.ctx = ctx
        self.total = total
        self.send, self.receive = anyio.create_memory_object_stream[tuple[float, str]](max_buffer_size=1024)

    def emit(self, event: Any) -> None:
        """Called in the worker thread; never raises into the loop."""
        if not isinstance(event, VerdictReady):
            return
        it = event.iteration
        verdict = it.verdict
        said = "passed" if verdict.passed else "failed: " + (verdict.reasons[0] if verdict.reasons else "no program")
        name = "your program as it is" if it.index == 0 else f"attempt {it.index}"
        # a candidate's error message, shown by the agent's UI (often a terminal): one line,
        # its control characters escaped, so no clipboard write or overwritten "passed"
        message = printable(f"{name}: {said}").replace("\n", "\\n").replace("\t", "\\t")[:300]
        try:
            anyio.from_thread.run_sync(self.send.send_nowait, (float(it.index + 1), message))
        except Exception:  # the call ended (cancelled, the client went away): nobody listens
            pass

    async def forward(self) -> None:
        async with self.receive:
            async for step, message in self.receive:
                try:
                    await self.ctx.report_progress(step, float(self.total), message)
                except Exception:  # the client went away: the call is being cancelled
                    return


# --------------------------------------------------------------------------- the server
def build_server(host: Host, *, name: str = "selfheal") -> MCPServer:
    """The MCP server whose tools do their work where ``host`` says."""
    server = MCPServer(name, instructions=INSTRUCTIONS, version=_version(), log_level="WARNING")

    async def call(ctx: Context, tool: str, fn: Callable[[Principal, threading.Event], T]) -> T:
        with said():
            principal = await host.principal(ctx)
            if tool != "heal":  # the host admits a heal by its own rules (quotas, run counts)
                admission.admit(tool, principal.policy, principal.gate)

            async def work() -> T:
                async with host.turn(principal):
                    return await in_thread(lambda cancel: fn(principal, cancel))

            return await unless_gone(ctx, work)

    @server.tool(
        annotations=ToolAnnotations(title="Run Python in the sandbox", read_only_hint=True, open_world_hint=False),
    )
    async def run_code(
        code: Annotated[str, Field(description="The Python program to run, as a file (it runs as __main__).")],
        ctx: Context,
        inputs: Annotated[
            dict[str, JsonValue] | None,
            Field(description="Values the program sees as global variables, by name (plain JSON data)."),
        ] = None,
        timeout_s: Annotated[
            float | None, Field(gt=0, description="Seconds the program may run (at most the server's limit).")
        ] = None,
    ) -> Annotated[CallToolResult, SandboxResult]:
        """Run a Python program in selfheal's hardened sandbox, never on the host or in the
        user's kernel: no network, a read-only filesystem with a small /tmp, no host
        environment or secrets, memory, process and time limits. Returns what happened as
        data: status (ok, error, timeout, oom, killed, blocked), the exception's type,
        message and line, the program's frames with the failing frame's locals (secrets
        redacted), stdout and stderr (capped), tables as HTML, figures as PNG (also as
        image content), and what it tried beyond its folder (network, processes, files)."""
        with said():
            admission.check_text("code", code, host.settings.max_code_bytes)
            admission.check_inputs(inputs or {}, host.settings.max_code_bytes)

        def run(principal: Principal, cancel: threading.Event) -> Any:
            return work.run_code(principal.bench, code, dict(inputs or {}), timeout_s, cancel)

        result = await call(ctx, "run_code", run)
        data = result.to_dict()
        images = [
            ImageContent(type="image", data=o["data"], mime_type="image/png")
            for o in data["outputs"]
            if o["mime"] == "image/png" and _is_base64(o["data"])
        ]
        return CallToolResult(content=[_json_text(data), *images], structured_content=data)

    @server.tool(
        annotations=ToolAnnotations(title="Check a fix against the user's program", read_only_hint=True),
    )
    async def check_fix(
        original: Annotated[str, Field(description="The user's program as they wrote it, with their asserts.")],
        candidate: Annotated[str, Field(description="Your fixed version of it.")],
        ctx: Context,
        tests: Annotated[
            str | None, Field(description="Python asserts the program must pass, run after it (optional).")
        ] = None,
    ) -> Annotated[CallToolResult, CheckShape]:
        """Judge a candidate fix exactly as selfheal's loop judges its own: the original runs
        first (it is the spec), then the candidate in the sandbox with the user's asserts
        and tests. The verdict is "passed", "failed", or "rejected" by the spec guard (an
        assert deleted, changed or silenced, a failure swallowed, an expected value
        hard-coded...: which rule, which line). "verified_by" says what checked the output;
        "only_runs" means it passed only by running. A passing candidate comes back as the
        minimal hand-over ("fix": the smallest change to the original that passes the same
        checks, its diff, and "capabilities": what it newly can do — network, process,
        files, environment, dynamic-code, threads, probe — with lines). Hand a fix to the
        user only when verdict is "passed" and verified_by is not empty."""
        with said():
            for what, text in (("original", original), ("candidate", candidate), ("tests", tests or "")):
                admission.check_text(what, text, host.settings.max_code_bytes)

        def check(principal: Principal, cancel: threading.Event) -> dict[str, Any]:
            withheld = admission.withheld(principal.policy)
            checked = work.check_fix(principal.bench, original, candidate, tests, cancel, hand_over=not withheld)
            return work.check_record(checked, withheld)

        data = await call(ctx, "check_fix", check)
        return CallToolResult(content=[_json_text(data)], structured_content=data)

    @server.tool(annotations=ToolAnnotations(title="Heal a program with selfheal's loop", read_only_hint=True))
    async def heal(
        code: Annotated[str, Field(description="The failing program (round 0; its asserts are the spec).")],
        ctx: Context,
        tests: Annotated[str | None, Field(description="Python asserts the fix must pass (optional).")] = None,
        task: Annotated[
            str | None, Field(description="What the program does wrong or still lacks (optional: else make it pass).")
        ] = None,
        max_iterations: Annotated[
            int | None, Field(ge=1, description="Most repair rounds (at most the server's setting).")
        ] = None,
    ) -> Annotated[CallToolResult, RunRecord]:
        """Run selfheal's own loop (planner → developer → QA, on the server's configured
        model, every candidate in the sandbox, judged by the user's asserts and the spec
        guard) until a candidate passes or the rounds run out. Sends a progress
        notification per attempt; cancelling the call stops the run and removes its
        containers. Returns the run record exactly as `selfheal run --json` prints it
        ("outcome", "final_code", "fix" with its capabilities, "verified_by",
        "iterations"), also readable later as the resource linked in the result."""
        settings = host.settings
        with said():
            for what, text in (("code", code), ("tests", tests or ""), ("task", task or "")):
                admission.check_text(what, text, settings.max_code_bytes)
        request = HealRequest(code, tests, task or "", max_iterations)
        total = min(max_iterations or settings.max_iterations, settings.max_iterations) + 1
        progress = Progress(ctx, total)

        def run(principal: Principal, cancel: threading.Event) -> dict[str, Any]:
            try:
                return work.run_record(host.heal(principal, request, progress.emit, cancel))
            finally:
                anyio.from_thread.run_sync(progress.send.close)

        record = await alongside(progress.forward, call(ctx, "heal", run), progress.send.close)
        principal = await host.principal(ctx)
        run_id = principal.records.add(record)
        link = ResourceLink(
            type="resource_link",
            uri=RECORD_URI.format(run_id=run_id),
            name=f"run {run_id}",
            mime_type="application/json",
            description="This run's record (only you can read it).",
        )
        return CallToolResult(content=[_json_text(record), link], structured_content=record)

    @server.tool(annotations=ToolAnnotations(title="Explain why a program fails", read_only_hint=True))
    async def explain_failure(
        code: Annotated[str, Field(description="The failing Python program.")], ctx: Context
    ) -> Annotated[CallToolResult, ExplanationShape]:
        """Run the program in the sandbox and explain its failure with selfheal's own,
        model-free diagnosis: the failing line, the exception, and what follows from it (a
        close column or attribute for a misspelt one, a dtype that does not fit, both
        shapes of a mismatch), with the one edit of the failing line it implies, if any."""
        with said():
            admission.check_text("code", code, host.settings.max_code_bytes)
        data = await call(ctx, "explain_failure", lambda p, cancel: work.explain_failure(p.bench, code, cancel))
        return CallToolResult(content=[_json_text(data)], structured_content=data)

    @server.resource(
        RECORD_URI,
        name="run record",
        description="The record of one of your heal runs, by the id its result links (only yours).",
        mime_type="application/json",
    )
    async def run_record(run_id: str, ctx: Context) -> str:
        principal = await host.principal(ctx)
        record = principal.records.kept.get(run_id)
        if record is None:
            raise ResourceError(f"No run {run_id[:40]!r} of yours is kept (the last {RECORDS_KEPT} are).")
        return json.dumps(record)

    server.middleware.append(_known_arguments(server))
    return server


def _known_arguments(server: MCPServer) -> ServerMiddleware[Any]:
    """A ``tools/call`` with an argument its tool does not take is refused (the SDK would
    drop it silently: an agent would believe it was used)."""
    takes: dict[str, dict[str, Any]] = {}

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            if not takes:
                takes.update({t.name: dict(t.input_schema.get("properties", {})) for t in await server.list_tools()})
            tool, arguments = ctx.params.get("name"), ctx.params.get("arguments") or {}
            if tool in takes and isinstance(arguments, dict):
                try:
                    admission.check_arguments(str(tool), arguments, takes[str(tool)])
                except SelfHealError as exc:
                    raise MCPError(code=INVALID_PARAMS, message=str(exc)) from None
        return await call_next(ctx)

    return middleware


@contextmanager
def said() -> Iterator[None]:
    """The package's own errors (bad input, the policy, the sandbox) as the tool's error
    result: the message reaches the agent, which can act on it."""
    try:
        yield
    except SelfHealError as exc:
        raise ToolError(str(exc)) from None


def _json_text(data: Any) -> TextContent:
    return TextContent(type="text", text=json.dumps(data, indent=1))


def _is_base64(data: str) -> bool:
    try:
        base64.b64decode(data, validate=True)
    except ValueError:
        return False
    return True


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("selfheal-jupyter")
    except PackageNotFoundError:
        return "0"
