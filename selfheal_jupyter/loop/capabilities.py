"""What a fix newly can do: read from the syntax trees of the code handed over and of
the user's cell, before anyone runs it in their kernel.

The sandbox judged the fix where it has no network, no other process, no secrets and a
folder of its own; the user's kernel has all of those. So the review says what the code
handed over can reach there that the user's cell did not: a network call, a process,
files written or deleted outside its folder, environment variables or secrets, code it
builds at run time, code that runs later or beside it (threads, signal handlers, exit
hooks), and a probe of where it runs (``sys.modules``, ``ipykernel``, ``get_ipython``,
``/proc``, its uid or host name) — the way a program tells the sandbox from a kernel.

Each name is resolved through the code's imports (and the notebook's, which the
prelude runs) to a dotted path, so ``from urllib.request import urlopen as get`` is
still ``urllib.request.urlopen``. What the user's cell does too is not news and is left
out. Nothing here runs the code; what it *did* in the sandbox is observed apart
(``ExecutionResult.tried``)."""

from __future__ import annotations

import ast
import re

from ..model import Capability

# dotted path (anchored regex over the whole path) → kind; the first that matches wins,
# so the narrow rules come before the broad ones of the same module.
_RULES: list[tuple[str, str]] = [
    # a probe of where it runs
    (r"sys\.(modules|argv|orig_argv|executable|ps1|ps2|_getframe|gettrace|getprofile)(\..*)?", "probe"),
    (r"os\.(getuid|geteuid|getgid|getegid|getresuid|getresgid|getgroups|getlogin|getpid|getppid|uname)", "probe"),
    (r"(platform\.(node|uname)|socket\.(gethostname|getfqdn)|pwd|grp|psutil)(\..*)?", "probe"),
    (r"inspect\.(stack|currentframe|getouterframes|trace)|gc\.(get_objects|get_referrers)", "probe"),
    (r"get_ipython|__IPYTHON__|__file__|IPython\.(get_ipython|core\.getipython)(\..*)?|ipykernel(\..*)?", "probe"),
    (r"(os|multiprocessing)\.cpu_count", ""),  # harmless: no rule of the module below applies
    # code that runs later or beside it
    (r"multiprocessing\.(pool\.)?ThreadPool|multiprocessing\.dummy(\..*)?", "threads"),
    (r"concurrent\.futures\.ThreadPoolExecutor|asyncio\.to_thread", "threads"),
    (r"threading\.(Thread|Timer|excepthook|settrace|setprofile)|_thread\.start_new(_thread)?", "threads"),
    (r"atexit\.register|sched\.scheduler", "threads"),
    (r"signal\.(signal|alarm|setitimer|set_wakeup_fd|pthread_kill|raise_signal|siginterrupt)", "threads"),
    (r"weakref\.finalize|sys\.(settrace|setprofile|addaudithook)", "threads"),
    # a process
    (r"(subprocess|multiprocessing|pty|pexpect|sh|plumbum)(\..*)?", "process"),
    (r"os\.(system|popen|exec\w*|spawn\w*|fork\w*|posix_spawn\w*|kill|killpg|startfile)", "process"),
    (r"concurrent\.futures\.ProcessPoolExecutor|asyncio\.create_subprocess_\w+", "process"),
    # the network
    (
        r"(socket|ssl|socketserver|requests|httpx|aiohttp|urllib3|pycurl|websocket|websockets|paramiko)(\..*)?",
        "network",
    ),
    (r"(urllib\.request|http\.client|http\.server|ftplib|smtplib|poplib|imaplib|nntplib|telnetlib)(\..*)?", "network"),
    (r"(xmlrpc|webbrowser|grpc|boto3|botocore)(\..*)?", "network"),
    (r"asyncio\.(open_connection|start_server|open_unix_connection|start_unix_server)", "network"),
    (r"urllib\.urlopen|urllib\.request", "network"),
    # environment variables and secrets
    (r"os\.(environ|environb|getenv|getenvb|putenv|unsetenv)(\..*)?", "environment"),
    (r"(getpass|keyring|netrc|dotenv)(\..*)?", "environment"),
    # code built or loaded at run time
    (r"eval|exec|compile|__import__|breakpoint", "dynamic-code"),
    (r"builtins\.(eval|exec|compile|__import__)", "dynamic-code"),
    (r"(importlib|runpy|ctypes|cffi|marshal|code|codeop|dill|cloudpickle|shelve)(\..*)?", "dynamic-code"),
    (r"(pickle|_pickle)\.(loads?|Unpickler)|joblib\.load|types\.(FunctionType|CodeType)", "dynamic-code"),
]
_COMPILED = [(re.compile(pattern + r"\Z"), kind) for pattern, kind in _RULES]
_BUILTINS = {"eval", "exec", "compile", "__import__", "breakpoint", "open", "get_ipython", "__IPYTHON__", "__file__"}

_PROBE_TEXT = re.compile(
    r"ipykernel|IPython|get_ipython|__IPYTHON__|google\.colab|JPY_[A-Z_]+|selfheal|candidate\.py"
    r"|^/proc(/|$)|^/\.dockerenv$|^/sys/fs/cgroup|^/run/\.containerenv$"
)
_URL = re.compile(r"^(https?|ftp|wss?)://", re.IGNORECASE)

# Calls that write or delete files: the dotted callee → which arguments are paths.
_FILE_FUNCTIONS = re.compile(
    r"os\.(remove|unlink|rmdir|removedirs|rename|renames|replace|mkdir|makedirs|chmod|chown|lchown|symlink|link"
    r"|truncate|utime|mkfifo|mknod)|shutil\.(rmtree|move|copy|copy2|copyfile|copytree|chown|make_archive|unpack_archive)"
    r"|numpy\.(save|savez|savez_compressed|savetxt)|tempfile\.\w+"
)
_DELETIONS = re.compile(r"os\.(remove|unlink|rmdir|removedirs)|shutil\.rmtree|\w+\.(unlink|rmdir)")
# Methods that write their receiver (pathlib) or their first argument (pandas, figures).
_PATH_METHODS = {"write_text", "write_bytes", "unlink", "rmdir", "mkdir", "touch", "rename", "replace", "chmod"}
_PATH_METHODS |= {"symlink_to", "hardlink_to"}
_TO_FILE = re.compile(
    r"to_(csv|excel|json|parquet|pickle|hdf|feather|stata|html|latex|markdown|xml|orc)|savefig|tofile|save"
)
_PATH_KEYWORDS = ("path", "path_or_buf", "fname", "file", "filename", "excel_writer", "dst", "src")
_WRITE_MODE = re.compile(r"[wax+]")


def capabilities(code: str, cell: str | None, notebook_imports: dict[str, str] | None = None) -> list[Capability]:
    """What ``code`` can do that ``cell`` (the user's, None for a task without one) does
    not, one entry per place, in the order of the code. ``notebook_imports`` maps the
    names earlier cells import to their dotted paths (the prelude binds them)."""
    found = scan(code, notebook_imports)
    theirs = {(c.kind, c.evidence) for c in scan(cell, notebook_imports)} if cell else set()
    return [c for c in found if (c.kind, c.evidence) not in theirs]


def scan(code: str, notebook_imports: dict[str, str] | None = None) -> list[Capability]:
    """Everything of each kind ``code`` holds (empty when it does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    return _Scanner(tree, dict(notebook_imports or {})).run()


class _Scanner:
    def __init__(self, tree: ast.Module, imports: dict[str, str]) -> None:
        self.tree = tree
        self.aliases = imports
        self.parents: dict[ast.AST, ast.AST] = {}
        self.constants: dict[str, str | None] = {}
        self.paths: dict[str, ast.AST] = {}
        """Names bound to ``Path(...)`` (their methods are file operations)."""
        self.defined: set[str] = set()
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.aliases[top] = top
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if alias.name != "*":
                        self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defined.add(node.name)
            elif isinstance(node, ast.Assign):
                value = node.value
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        text = value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None
                        # bound twice, or to anything else: not a known constant
                        self.constants[target.id] = text if target.id not in self.constants else None
                        if isinstance(value, (ast.Call, ast.BinOp)):
                            self.paths[target.id] = value
        self.found: list[Capability] = []

    # ------------------------------------------------------------------ names
    def dotted(self, node: ast.AST) -> str | None:
        """The dotted path a name or attribute chain stands for (None: not one)."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute):
            attrs.append(node.attr)
            node = node.value
        if isinstance(node, ast.Name):
            if node.id in self.aliases:
                base = self.aliases[node.id]
            elif node.id in _BUILTINS and node.id not in self.defined and node.id not in self.constants:
                base = node.id
            else:
                return None  # a variable of the program's (``code.strip``): no module
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "__import__"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            base = node.args[0].value  # ``__import__("sys").modules``
        else:
            return None
        return ".".join([base, *reversed(attrs)])

    def add(self, kind: str, node: ast.AST, evidence: str) -> None:
        line = getattr(node, "lineno", 1)
        if not any(c.kind == kind and c.line == line and c.evidence == evidence for c in self.found):
            self.found.append(Capability(kind=kind, line=line, evidence=evidence))  # type: ignore[arg-type]

    # ------------------------------------------------------------------ walk
    def run(self) -> list[Capability]:
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and not self._inner(node):
                self._name(node)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                self._text(node)
            if isinstance(node, ast.Call):
                self._call(node)
        self.found.sort(key=lambda c: (c.line, c.kind))
        return self.found

    def _inner(self, node: ast.AST) -> bool:
        """Part of a longer chain (``os`` in ``os.environ.get``): the chain is judged."""
        parent = self.parents.get(node)
        return isinstance(parent, ast.Attribute) and parent.value is node

    def _name(self, node: ast.Name | ast.Attribute) -> None:
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            return
        path = self.dotted(node)
        if path is None:
            return
        # the longest prefix a rule names decides the kind (``multiprocessing.cpu_count``
        # is not ``multiprocessing``); the shortest prefix that rule names is the evidence
        # (``os.environ.get`` and ``os.environ[...]`` are both ``os.environ``)
        parts = path.split(".")
        prefixes = [".".join(parts[:end]) for end in range(1, len(parts) + 1)]
        for prefix in reversed(prefixes):
            for pattern, kind in _COMPILED:
                if pattern.match(prefix):
                    if kind:
                        evidence = next(p for p in prefixes if pattern.match(p))
                        self.add(kind, node, evidence)
                    return

    def _text(self, node: ast.Constant) -> None:
        text = str(node.value)
        if len(text) <= 200 and _PROBE_TEXT.search(text):
            self.add("probe", node, repr(text[:60]))
        parent = self.parents.get(node)
        if (
            _URL.match(text)
            and isinstance(parent, ast.Call)
            and node in parent.args + [k.value for k in parent.keywords]
        ):
            name = self._callee_name(parent)
            if name and (
                name.startswith("read_")
                or name in {"urlopen", "urlretrieve", "get", "post", "put", "delete", "request", "load", "open"}
            ):
                self.add("network", node, f"{name}({text[:60]!r})")

    @staticmethod
    def _callee_name(call: ast.Call) -> str:
        func = call.func
        if isinstance(func, ast.Attribute):
            return func.attr
        return func.id if isinstance(func, ast.Name) else ""

    # ------------------------------------------------------------------ files
    def _call(self, call: ast.Call) -> None:
        path = self.dotted(call.func) or ""
        name = self._callee_name(call)
        target: ast.AST | None
        if path in ("open", "io.open", "codecs.open") or (name == "open" and isinstance(call.func, ast.Attribute)):
            function = path in ("open", "io.open", "codecs.open")
            mode = self._argument(call, 1, "mode")
            if function:
                target = self._argument(call, 0, "file", "filename")
            else:
                assert isinstance(call.func, ast.Attribute)
                target = call.func.value
                if not self._path_like(target, "touch"):
                    return
                mode = self._argument(call, 0, "mode")  # ``Path(...).open("w")``
            text = mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else ""
            if _WRITE_MODE.search(text) and self._outside(target):
                self.add("files", call, f"open({self._shown(target)}, {text!r})")
            return
        if _FILE_FUNCTIONS.fullmatch(path):
            if path.startswith("tempfile."):  # gettempdir too: it writes a file there to test it
                self.add("files", call, f"{path} (the system's temporary folder)")
                return
            paths = [self._argument(call, i, k) for i, k in ((0, "path"), (1, "dst"))]
            deletion = bool(_DELETIONS.fullmatch(path))
            for target in paths:
                if target is not None and (self._outside(target) or (deletion and self._unknown(target))):
                    self.add("files", call, f"{path}({self._shown(target)})")
                    return
            return
        if isinstance(call.func, ast.Attribute) and (name in _PATH_METHODS or _TO_FILE.fullmatch(name)):
            receiver = call.func.value
            if name in _PATH_METHODS:
                target = receiver
            else:
                target = self._argument(call, 0, *_PATH_KEYWORDS)
            if target is None or not self._path_like(target, name):
                return
            deletion = name in ("unlink", "rmdir")
            if self._outside(target) or (deletion and self._unknown(target)):
                self.add(
                    "files",
                    call,
                    f"{self._shown(target)}.{name}(...)"
                    if name in _PATH_METHODS
                    else f".{name}({self._shown(target)})",
                )

    @staticmethod
    def _argument(call: ast.Call, index: int, *keywords: str) -> ast.AST | None:
        for kw in call.keywords:
            if kw.arg in keywords:
                return kw.value
        return call.args[index] if len(call.args) > index else None

    def _path_like(self, node: ast.AST, method: str) -> bool:
        """A pathlib method is judged only on what is clearly a path (``Path(...)``, a
        ``/`` join, a string): ``str.replace`` and ``dict.update`` are not file writes."""
        if method not in _PATH_METHODS:
            return True
        if isinstance(node, ast.Name) and node.id in self.paths:
            node = self.paths[node.id]
        if isinstance(node, ast.Call):
            callee = self.dotted(node.func) or ""
            return callee.endswith(("Path", "PurePath", "PosixPath")) or callee.endswith(".home")
        return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)

    def _leading_text(self, node: ast.AST, seen: frozenset[str] = frozenset()) -> str | None:
        """The text a path expression starts with, when it can be read without running it."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.paths and node.id not in seen and self.constants.get(node.id) is None:
                return self._leading_text(self.paths[node.id], seen | {node.id})
            return self.constants.get(node.id)
        if isinstance(node, ast.JoinedStr) and node.values:
            return self._leading_text(node.values[0], seen)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Div)):
            return self._leading_text(node.left, seen)
        if isinstance(node, ast.Call):
            callee = self.dotted(node.func) or ""
            if callee.endswith(".home") or callee == "os.path.expanduser":
                return "~"
            if callee in ("tempfile.gettempdir", "os.path.abspath") or callee.startswith(("os.environ", "os.getenv")):
                return "/"  # the system's or the environment's folder: not the working folder
            if callee in ("os.path.join", "posixpath.join") or callee.endswith(("Path", "PurePath", "PosixPath")):
                return self._leading_text(node.args[0], seen) if node.args else None
        return None

    def _outside(self, node: ast.AST | None) -> bool:
        text = self._leading_text(node) if node is not None else None
        if text is None:
            return False
        return (
            text.startswith(("/", "~", "\\"))
            or bool(re.match(r"[A-Za-z]:[\\/]", text))
            or ".." in re.split(r"[\\/]", text)
        )

    def _unknown(self, node: ast.AST) -> bool:
        return self._leading_text(node) is None

    def _shown(self, node: ast.AST | None) -> str:
        if node is None:
            return "?"
        text = ast.unparse(node)
        return text if len(text) <= 50 else text[:47] + "..."
