"""Every option of selfheal-jupyter and its default, in one place.

In a notebook: ``%config SelfHeal.max_iterations = 5``. From the CLI, flags override
the same traits. Secrets never live here: the API key is read from ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import os

from traitlets import Bool, Float, Int, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from .model import Limits

DEFAULT_IMAGE = "selfheal-sandbox"


class SelfHeal(Configurable):
    """Options of the self-healing agent (``%config SelfHeal.<name> = value``)."""

    # --- endpoint -------------------------------------------------------------
    base_url = Unicode(
        help="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or "
        "http://localhost:11434/v1 (Ollama). Empty: $OPENAI_BASE_URL, else the "
        "embedded local model."
    ).tag(config=True)
    model = Unicode(
        help="Model name sent to the endpoint. Empty: $SELFHEAL_MODEL, else the "
        "endpoint's first listed model."
    ).tag(config=True)
    llm_timeout_s = Float(120.0, help="Seconds before one LLM request times out.").tag(config=True)
    llm_max_retries = Int(
        2, help="Retries (by the openai SDK, with backoff) on 429 / 5xx / timeouts."
    ).tag(config=True)
    temperature = Float(0.2, help="Sampling temperature of the first attempt.").tag(config=True)
    max_tokens = Int(1024, help="Most tokens one reply may have.").tag(config=True)

    @default("base_url")
    def _default_base_url(self) -> str:
        return os.environ.get("OPENAI_BASE_URL", "")

    @default("model")
    def _default_model(self) -> str:
        return os.environ.get("SELFHEAL_MODEL", "")

    # --- loop -----------------------------------------------------------------
    max_iterations = Int(4, help="Most developer → QA rounds per task.").tag(config=True)
    token_budget = Int(
        60_000, help="Most tokens (prompt + completion) one run may spend; 0 = no limit."
    ).tag(config=True)
    time_budget_s = Float(
        900.0, help="Most wall-clock seconds one run may take; 0 = no limit."
    ).tag(config=True)
    auto_plan = Bool(True, help="Ask the planner for steps before writing code.").tag(config=True)
    generated_checks = Int(
        0,
        help="How many checks QA writes from the task alone before any code (AgentCoder's "
        "test designer; for a repair from the task, comments and docstrings). They are soft: "
        "a failing one is shown to the developer to fix the program or say why the check is "
        "wrong, and helps choose among candidates; never counted as your tests. 0 = none.",
    ).tag(config=True)
    candidates = Int(
        1,
        help="Programs sampled per round; the one QA picks by execution is kept (your tests "
        "first, then agreement on the generated checks, CodeT-style). Each costs a model call.",
    ).tag(config=True)
    runtime_values = Bool(
        True,
        help="Repair strategy: show the developer the values of the failing statement's "
        "sub-expressions (call results, arguments, compared operands, the caller's values), "
        "from a second sandbox run of the program up to that statement (LDB-style). On by "
        "default: on the first 10 exercises with the embedded model it raised the loop's "
        "pass@1 from 70% to 90% and cost fewer tokens per solved problem.",
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

    @validate("generated_checks", "candidates", "restart_after")
    def _non_negative(self, proposal):  # noqa: ANN001 - traitlets API
        value, name = proposal["value"], proposal["trait"].name
        low = 1 if name == "candidates" else 0
        if value < low:
            raise TraitError(
                f"SelfHeal.{name} must be at least {low} (got {value}); e.g. "
                f"`%config SelfHeal.{name} = {max(low, 2)}`."
            )
        return value

    # --- sandbox --------------------------------------------------------------
    image = Unicode(DEFAULT_IMAGE, help="Docker image the candidates run in.").tag(config=True)
    timeout_s = Float(30.0, help="Wall-clock seconds one candidate may run.").tag(config=True)
    memory = Unicode("512m", help="Memory (and memory+swap) limit of the sandbox.").tag(
        config=True
    )
    pids_limit = Int(64, help="Most processes/threads inside the sandbox.").tag(config=True)
    cpus = Float(1.0, help="CPUs the sandbox may use.").tag(config=True)
    output_limit_bytes = Int(1 << 20, help="Most bytes kept of stdout and of stderr.").tag(
        config=True
    )
    pool_size = Int(1, help="Warm containers kept ready.").tag(config=True)
    context_max_bytes = Int(
        100 << 20,
        help="Largest notebook variable (pickled size, bytes) copied into the sandbox as "
        "context of %%heal / %%agent; a larger one is not copied and the panel says so.",
    )
    runtime = Unicode(
        "",
        help="Docker runtime of the sandbox containers (docker run --runtime). 'runsc' "
        "(gVisor, registered by sandbox/setup-engine.sh) puts a second kernel between "
        "candidates and the host, for untrusted models; each run then costs tens of ms "
        "more and imports are slower. Empty: the engine's default (runc).",
    ).tag(config=True)

    # --- embedded model -------------------------------------------------------
    local_model = Unicode(
        "qwen2.5-coder-1.5b", help="Embedded model used when no endpoint is configured."
    ).tag(config=True)
    local_threads = Int(1, help="CPU threads of the embedded model.").tag(config=True)
    local_context = Int(
        8192, help="Context window (tokens) of the embedded model's server."
    ).tag(config=True)

    # --- front ----------------------------------------------------------------
    quiet = Bool(False, help="Show only the final summary, not every iteration.").tag(
        config=True
    )
    widget = Bool(True, help="Show the live ipywidgets panel when a front end is attached.").tag(
        config=True
    )
    choice_timeout_s = Float(
        300.0,
        help="With a live front end, how long a successful %%agent cell waits for Insert / "
        "Run in my kernel / Done before it ends (Insert places the code right below only "
        "while the cell waits; later it lands below the next cell you run). 0: do not wait.",
    ).tag(config=True)

    def limits(self) -> Limits:
        """The sandbox limits these options describe."""
        return Limits(
            timeout_s=self.timeout_s,
            memory=self.memory,
            pids=self.pids_limit,
            cpus=self.cpus,
            output_bytes=self.output_limit_bytes,
        )
