"""Error signatures: the same mistake in different kernels and tasks -> one short, stable key.

Pure functions; deterministic; no triton import.

    signature_of(core_from_root("TypeError", "'dtype' object is not callable", in_kernel=True))
        == "CompilationError: 'dtype' object is not callable"

A signature is `kind: normalized message` of the error's *core*, which comes from one of two places:
- `core_from_root`: the judge's ErrorDetail.root_* fields, read from the live exception (the main path:
  nothing is parsed, so the wording of a detail's message or excerpt never moves a signature);
- `core_from_text`: a traceback text (what the seed-rule triggers and the GPU host collect, and ErrorDetails
  stored before root_* existed): the text is split into its chain of exceptions and Triton's wrappers
  (models.TRITON_WRAPPERS) are unwrapped from their printed form.
Either way, errors raised inside kernel code are labelled `CompilationError` whichever path raised them,
so the interpreter and the compiler agree; errors raised on the host side (argument binding, launch) keep
their own type. `normalize_message` then drops paths, line/column numbers, hex addresses, identifiers,
literal values, shapes and dtypes, and keeps the message's fixed words, the Triton API named (`tl.load`)
and Python/Triton type names (`tensor`, `dtype`, `constexpr`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..models import TRITON_WRAPPERS as WRAPPERS

KERNEL_KIND = "CompilationError"
MAX_MESSAGE = 160

_CHAIN_SEPARATORS = re.compile(
    r"^(?:The above exception was the direct cause of the following exception:"
    r"|During handling of the above exception, another exception occurred:)\s*$",
    re.M,
)
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failure|Construct|Timeout|Interrupt|Exit|Crashed|Died"
                       r"|Resources|ErrorImpl|Abort|Warning)"
                       r"|[A-Za-z_][\w]*\.[\w.]*[A-Z]\w*)(?::[ \t]?(.*))?$")
# `TypeError("...")` as Triton's wrappers print their cause (possibly cut short: no closing quote).
_REPR = re.compile(r"""^([A-Z]\w*)\((['"])(.*?)(?:\2\)|\.\.\.)?$""", re.S)
_EXCERPT_HEAD = re.compile(r"^at \d+:\d+:\s*$")
_CARET = re.compile(r"^\s*\^+\s*$")

_DTYPES = (r"(?:fp8e4nv|fp8e4b15|fp8e5|fp8e4b8|fp8e5b16|fp16|bf16|fp32|fp64|tf32|float8\w*|float16|float32|float64|"
           r"bfloat16|u?int1|u?int8|u?int16|u?int32|u?int64|i1|i8|i16|i32|i64|f16|f32|f64)")
_KEEP_QUOTED = {
    "tensor", "dtype", "int", "float", "str", "list", "tuple", "dict", "bool", "NoneType", "function",
    "module", "torch.dtype", "triton.language", "constexpr", "block_type", "pointer_type", "Tensor",
    "JITFunction", "builtin_function_or_method", "numpy.ndarray", "ndarray",
    # keyword names of tl APIs that messages quote: fixed words, not the kernel's identifiers
    "mask", "other", "axis", "boundary_check", "padding_option", "input_precision", "eviction_policy",
    "cache_modifier", "num_warps", "num_stages",
}

# (pattern, replacement), applied in order to the unwrapped first line of the message.
_RULES: list[tuple[re.Pattern[str], str]] = [(re.compile(p), r) for p, r in [
    # the missing argument's name ('dtype', 'y'...) and which tl.static_range bound: not the mistake
    (r"\brequired (positional|keyword-only) (arguments?): .*", r"required \1 \2: <name>"),
    (r"\bused as tl\.static_range (?:start|end|step) value\b", "used as tl.static_range <bound> value"),
    (r"<class '(?:[\w]+\.)*(\w+)'>", r"<class \1>"),
    (r"(?:[A-Za-z]:)?(?:[\\/][\w.\-<>]+){2,}[\\/]?", "<path>"),
    (r"\b0x[0-9a-fA-F]+\b", "<addr>"),
    (r"\b[\w\-]+\.py\b", "<file>.py"),
    (r"\bline \d+\b", "line <n>"),
    (r"\bat \d+:\d+\b", "at <loc>"),
    (r"<\[[^\]]*\],\s*[\w<>]+>", "<block>"),
    (r"\btriton\.language\.(?:core\.)?" + _DTYPES + r"\b", "<dtype>"),
    (r"\btl\." + _DTYPES + r"\b", "tl.<dtype>"),
    (r"\btorch\." + _DTYPES + r"\b", "torch.<dtype>"),
    (r"(?<![\w.])" + _DTYPES + r"(?![\w])", "<dtype>"),
    (r"\bglobal variable \w+", "global variable <name>"),
    (r"\bhas no attribute '?\w+'?", "has no attribute <name>"),
    (r"\bfor shape \[.*\]", "for shape <shape>"),
    (r"(?:\bname )?'?\b(\w+)'? is not defined", "name <name> is not defined"),
    (r"^(?:[A-Za-z_]\w*\(\) )?got an unexpected keyword argument", "<fn>() got an unexpected keyword argument"),
    (r"\bkeyword argument '?\w+'?", "keyword argument <name>"),
    (r"\bone of \([^)]*\)", "one of <options>"),
    (r"\bof type: \S+", "of type: <type>"),
    (r"\b[A-Za-z_]\w*\(\)", "<fn>()"),
]]
_NUMBER = re.compile(r"(?<![\w<.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w>])")
_QUOTED = re.compile(r"""'([^'\n]*)'|"([^"\n]*)"|`([^`\n]*)`""")
_RUNS = [(re.compile(r"<n>(?:\s*(?:,|\*\*|\*|x)\s*<n>)+"), "<n>"),
         (re.compile(r"(?:'<dtype>'|<dtype>)(?:\s*,\s*(?:'<dtype>'|<dtype>))+"), "<dtype>"),
         (re.compile(r"\s+"), " ")]


@dataclass(frozen=True)
class CoreError:
    """The error that matters, after unwrapping: what a record stores and a signature is built from."""

    kind: str            # signature prefix: 'CompilationError' for kernel-code errors, else the type
    exception: str       # innermost exception type seen ('' when a wrapper carried only text)
    message: str         # its first meaningful line, raw
    in_kernel: bool      # raised while compiling / interpreting kernel code


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")


def core_from_root(exception: str, message: str, in_kernel: bool) -> CoreError:
    """The core of an error the judge already unwrapped (ErrorDetail.root_*): no text is parsed.

    A root that is itself a wrapper (`UnsupportedLanguageConstruct: unsupported AST node type: Break`)
    carried only text: it names no inner type, as `core_from_text` reads the same error from its traceback.
    """
    kind = KERNEL_KIND if in_kernel else (exception or "Error")
    inner = "" if exception in WRAPPERS else exception
    return CoreError(kind=kind, exception=inner, message=_first_line(message), in_kernel=in_kernel)


def split_chain(text: str) -> list[tuple[str, str]]:
    """(exception type, message) for each exception of a traceback text, root cause first.

    Reads Python's chained tracebacks (blocks joined by "The above exception was the direct cause...")
    and compact excerpts that list several `Type: message` entries after the frames, cause first.
    """
    chain = []
    for block in _CHAIN_SEPARATORS.split(text or ""):
        lines = block.rstrip().splitlines()
        last_frame = max((i for i, ln in enumerate(lines) if ln.startswith("  File ")), default=-1)
        start = last_frame + 1
        # Skip the frame's code line and its caret underline.
        while start < len(lines) and lines[start].startswith("    "):
            start += 1
        entry: list | None = None
        for line in lines[start:]:
            m = _EXC_LINE.match(line)
            if m:
                if entry:
                    chain.append((entry[0], "\n".join(entry[1]).strip()))
                entry = [m.group(1).rsplit(".", 1)[-1], [m.group(2) or ""]]
            elif entry:
                entry[1].append(line)
        if entry:
            chain.append((entry[0], "\n".join(entry[1]).strip()))
    return chain


def _strip_excerpt(message: str) -> str:
    """Drop a CompilationError's 'at L:C:' source excerpt and caret; keep the error text after it."""
    lines = message.strip().splitlines()
    if not lines or not _EXCERPT_HEAD.match(lines[0]):
        return message.strip()
    carets = [i for i, ln in enumerate(lines) if _CARET.match(ln)]
    if carets:
        return "\n".join(lines[carets[0] + 1:]).strip()
    return ""  # excerpt without caret: no error text of its own


def _unescape(text: str) -> str:
    return text.replace("\\'", "'").replace('\\"', '"').replace("\\\\", "\\")


def _is_excerpt_line(message: str, chain: list[tuple[str, str]]) -> bool:
    """A 'message' that is only a line of some CompilationError's source excerpt (kernel code)."""
    line = message.strip()
    return any(_EXCERPT_HEAD.match(m.splitlines()[0]) and line in (ln.strip() for ln in m.splitlines())
               for _, m in chain if m)


def core_from_text(exception: str, message: str = "", text: str = "") -> CoreError:
    """Unwrap Triton's wrappers down to the error that names the mistake, from a traceback text.

    For texts only: raw tracebacks (seed-rule triggers, GPU hosts) and ErrorDetails stored before the judge
    recorded root_* (`exception`, `message`, `excerpt`). The judge's own details go through `core_from_root`.
    """
    chain = split_chain(text) or [(exception.rsplit(".", 1)[-1], message or "")]
    if exception and chain[-1][0] != exception.rsplit(".", 1)[-1] and not text:
        chain = [(exception, message)]
    pos = len(chain) - 1
    exc, msg = chain[pos]
    in_kernel = False
    for _ in range(12):
        if exc in WRAPPERS:
            in_kernel = True
            inner = _strip_excerpt(msg)
            if not inner or _CARET.match(inner):
                if pos == 0:
                    exc, msg = "", inner
                    break
                pos -= 1
                exc, msg = chain[pos]
                continue
            m = _REPR.match(inner.strip())
            if m:
                exc, msg = m.group(1), _unescape(m.group(3))
                continue
            exc, msg = "", inner
            break
        m = _REPR.match(msg.strip())
        if m and in_kernel:
            exc, msg = m.group(1), _unescape(m.group(3))
            continue
        break
    first = _first_line(msg)
    if not first and text and message and message.strip() != (chain[-1][1] or "").strip() \
            and not _is_excerpt_line(message, chain):
        # The text lost the root cause (a tail-only excerpt): fall back to the caller's message line.
        inner = core_from_text(exception, message, "")
        return CoreError(KERNEL_KIND if in_kernel else inner.kind, inner.exception, inner.message,
                         in_kernel or inner.in_kernel)
    kind = KERNEL_KIND if in_kernel else (exc or exception or "Error")
    return CoreError(kind=kind, exception=exc, message=first, in_kernel=in_kernel)


def _quoted(m: re.Match[str]) -> str:
    raw = m.group(0)
    inner = next(g for g in m.groups() if g is not None)
    if inner in _KEEP_QUOTED:
        return f"'{inner}'"  # one quoting style: versions differ in '...' versus `...`
    if inner.startswith(("tl.", "<")) or "constexpr" in inner or "triton" in inner:
        return raw
    return "<name>"


def normalize_message(message: str) -> str:
    """The message's fixed words, with every variable part replaced by a placeholder."""
    out = message.strip()
    for pattern, repl in _RULES:
        out = pattern.sub(repl, out)
    out = _QUOTED.sub(_quoted, out)
    out = _NUMBER.sub("<n>", out)
    for pattern, repl in _RUNS:
        out = pattern.sub(repl, out)
    out = out.strip(" .:;")
    if len(out) > 100 and ". " in out:
        out = out.split(". ", 1)[0]  # the fixed first sentence; the rest is advice text
    return out[:MAX_MESSAGE]


def signature_of(core: CoreError) -> str:
    """`Kind: normalized message`, e.g. "CompilationError: arange's range must be a power of <n>"."""
    norm = normalize_message(core.message) or "<no message>"
    return f"{core.kind}: {norm}"


def error_line_of(core: CoreError) -> str:
    """The core error as a human reads it (not normalized), e.g. "TypeError: 'dtype' object is not callable"."""
    return f"{core.exception or core.kind}: {core.message}".strip()


def signature(exception: str, message: str = "", text: str = "") -> str:
    """The signature of a traceback text (see `core_from_text`)."""
    return signature_of(core_from_text(exception, message, text))


def error_line(exception: str, message: str = "", text: str = "") -> str:
    """The error line of a traceback text (see `core_from_text`)."""
    return error_line_of(core_from_text(exception, message, text))


_TL_API = re.compile(r"\btl\.(?:math\.|extra\.\w+\.)?[a-z_][\w]*")


def triton_apis(text: str) -> set[str]:
    """The `tl.xxx` names a text mentions (for relevance), dtypes folded to `tl.<dtype>`."""
    found = set()
    for name in _TL_API.findall(text or ""):
        found.add("tl.<dtype>" if re.fullmatch(r"tl\." + _DTYPES, name) else name)
    return found


def offending_line(text: str) -> str:
    """The kernel source line a traceback points at (a CompilationError's caret line, else the
    last frame outside site-packages / the standard library)."""
    lines = (text or "").splitlines()
    for i in range(len(lines) - 1, 0, -1):
        if _CARET.match(lines[i]) and lines[i - 1].strip():
            if i >= 2 and lines[i - 2].startswith("  File "):
                continue  # a Python frame's underline, not a Triton source excerpt
            return lines[i - 1].strip()
    frame = re.compile(r'^  File "([^"]+)", line \d+, in .*$')
    for block in _CHAIN_SEPARATORS.split(text or ""):  # root cause first: the kernel's own frame
        candidate = ""
        block_lines = block.splitlines()
        for i, ln in enumerate(block_lines[:-1]):
            m = frame.match(ln)
            nxt = block_lines[i + 1]
            if m and nxt.startswith("    ") and not m.group(1).startswith("<") and not any(
                    part in m.group(1) for part in ("site-packages", "/lib/python", "adaexplore_mcp")):
                candidate = nxt.strip()
        if candidate:
            return candidate
    return ""
