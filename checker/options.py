"""What every command of the command line shares: the exit codes, the errors that become them,
the shared options as argparse parent parsers, and the progress line on stderr. The command
modules import from here, never from one another (checker/cli.py only assembles them).

Exit codes (one table for every command, README "Exit codes"): 0 every property holds exhaustively
/ the trace reproduces / every verdict matches its record; 1 a property is violated / the trace
does not reproduce / a verdict differs from its record / `upgrade --check`: a file would change; 2
bad input; 3 no violation found but the search was bounded (a limit, the memory watch, or a
verdict that a search_bound cut could hide); 4 a part kcheck runs failed (conform's broker, a
Spark job); 5 the results were printed but saving them failed; 130 interrupted (Ctrl-C); 143
terminated (SIGTERM): both after printing what was found."""
from __future__ import annotations

import argparse
import os
import re
import time

from rich.console import Console


def write_file(path, text: str) -> None:
    """Every file kcheck writes for a user (a saved trace, a report page, a spec from `kcheck
    new`, JUnit, SARIF): written beside its place and renamed, so a full disk or a kill leaves
    the old file or none, never a half (a report once left a 0-byte page). OSError on failure,
    with the temporary file removed: the caller says what failed."""
    from pathlib import Path
    path = Path(path)
    if path.exists() and not path.is_file():
        # a device or a pipe the user named (/dev/stdout, a fifo): written to, never replaced
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def make_console(stderr: bool = False, **kw) -> Console:
    """Every terminal output of kcheck, made here: no emoji codes (rich reads an error's
    'my_spec.py:100:' as the emoji code ':100:' and prints 'my_spec.py💯'), no markup (a
    user's spec, variant or file name with brackets, 'fix[/]1', was read as a tag: mangled, or
    a MarkupError traceback; kcheck styles its own words with rich.text.Text instead) and no
    highlighting of the numbers and names in kcheck's own lines."""
    return Console(stderr=stderr, highlight=False, emoji=False, markup=False, **kw)

OK, VIOLATED, BAD_INPUT, BOUNDED, BROKER_FAILED, SAVE_FAILED = 0, 1, 2, 3, 4, 5
INTERRUPTED, TERMINATED = 130, 143


class BadInput(Exception):
    """Something the user gave is wrong: one line on stderr, exit BAD_INPUT."""


class PartFailed(Exception):
    """A part kcheck runs failed during the run (Spark's JVM, e.g. out of heap): one line naming
    the cause and where its log is, exit BROKER_FAILED (the code of a part that cannot run)."""


class SaveFailed(Exception):
    """Writing results failed after they were printed (exit SAVE_FAILED, one line)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are BadInput (one line, exit 2), naming the --help to read."""

    def error(self, message):
        raise BadInput(f"{message} (see 'kcheck {self.prog.split()[-1]} --help')"
                       if " " in self.prog else f"{message} (see 'kcheck --help')")


def path_value(opt: str):
    """An argparse type: a file or folder name the system can look up. One longer than it allows
    (a name over 255 bytes, a path over 4096) made pathlib raise 'File name too long' from inside
    an existence check, a traceback; a NUL byte made it raise ValueError."""
    def conv(s):
        raw = s.encode("utf-8", "surrogateescape")
        if b"\0" in raw or len(raw) > 4096 or any(len(part) > 255 for part in raw.split(b"/")):
            raise argparse.ArgumentTypeError(
                f"{opt} {s[:40]}{'...' if len(s) > 40 else ''}: not a path the system accepts "
                f"(a name is at most 255 bytes, a path 4096, with no NUL byte)")
        return s
    return conv


def writable_folder(opt: str, folder: str, what: str = "") -> None:
    """The folder an option names can be created and written: found before the run rather than
    when its first file is due (--checkpoint, conform's --out). BadInput otherwise."""
    import tempfile
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".kcheck-probe-"):
            pass
    except OSError as e:
        raise BadInput(f"{opt} {folder}: cannot write {what or 'files'} there ({e.strerror}); "
                       f"give a writable folder") from None


def positive(name: str, most: int | None = None, least: int = 1):
    """An argparse type: an integer from ``least`` (a positive integer by default) up to
    ``most`` when given, named in the error with the range that is valid."""
    kind = "a positive integer" if least == 1 else f"an integer from {least}"
    if most is not None:
        kind += f" up to {most}"

    def conv(s):
        try:
            v = int(s)
        except ValueError:
            v = None
        if v is None or v < least or (most is not None and v > most):
            raise argparse.ArgumentTypeError(f"{name} must be {kind}, got {s!r}")
        return v
    return conv


def params(pairs: list[str] | None) -> dict:
    """--param NAME=VALUE pairs -> {name: value text}; a name given twice with two values is an
    error, since it cannot mean both."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        if "=" not in pair:
            raise BadInput(f"--param {pair!r}: write NAME=VALUE, e.g. --param members=2")
        k, v = pair.split("=", 1)
        k, v = k.strip(), v.strip()
        if k in out and out[k] != v:
            raise BadInput(f"--param {k} is given twice ({k}={out[k]} and {k}={v}); give it once")
        out[k] = v
    return out


def out_dir(args) -> str | None:
    """Where --save writes; --out without --save would be silently ignored, so it is an error."""
    out = getattr(args, "out", None)
    if not getattr(args, "save", False):
        if out is not None:
            raise BadInput(f"--out {out} is given without --save; add --save to write there")
        return None
    return out or "counterexamples"


# ---------------------------------------------------------------------------------------------
# Parent parsers: each shared option is defined once (argparse's `parents=`)

def _parent() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(add_help=False)


def spec_option(help: str = "a shipped spec name or the path of a spec module") -> argparse.ArgumentParser:
    p = _parent()
    p.add_argument("spec", help=help)
    return p


def param_option(metavar: str = "NAME=VALUE", help: str | None = None) -> argparse.ArgumentParser:
    p = _parent()
    p.add_argument("--param", action="append", default=[], metavar=metavar,
                   help=help or "set a parameter of the spec (repeatable; 'kcheck list' names "
                                "each spec's parameters with their defaults and ranges)")
    return p


def variant_option(all_variants: bool = False) -> argparse.ArgumentParser:
    """--variant V, and with all_variants the exclusive --all-variants."""
    p = _parent()
    where = p.add_mutually_exclusive_group() if all_variants else p
    where.add_argument("--variant", type=_variant_name, metavar="V",
                       help="the variant to check (default: the spec's default variant; "
                            "'kcheck list' names them)")
    if all_variants:
        where.add_argument("--all-variants", action="store_true",
                           help="check every variant and compare each verdict with the record")
    return p


def _variant_name(text: str) -> str:
    """An argparse type: a variant's name, which is never empty (an empty one is not the
    default variant)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("--variant needs a variant's name ('kcheck list' names "
                                         "each spec's variants; leave the flag out for the "
                                         "default variant)")
    return text


def property_option() -> argparse.ArgumentParser:
    p = _parent()
    p.add_argument("--property", action="append", default=None, metavar="P",
                   help="check only this property (repeatable; default: every one)")
    return p


def json_option(help: str | None = None) -> argparse.ArgumentParser:
    p = _parent()
    p.add_argument("--json", action="store_true",
                   help=help or "print the results as one JSON document (checker/output_schema.json)")
    return p


def save_options(what: str = "counterexamples under counterexamples/<spec>/<variant>/",
                 default_out: str | None = None) -> argparse.ArgumentParser:
    """--save and --out DIR (an --out without --save is refused by out_dir)."""
    p = _parent()
    p.add_argument("--save", action="store_true", help=f"save {what}")
    p.add_argument("--out", default=default_out, type=path_value("--out"),
                   help=f"where --save writes (default {default_out or 'counterexamples'})")
    return p


def symmetry_option() -> argparse.ArgumentParser:
    """--no-symmetry: every state, not one per orbit of the spec's declared symmetry."""
    p = _parent()
    p.add_argument("--no-symmetry", action="store_true",
                   help="store every state, not one per orbit of the spec's declared symmetry")
    return p


def quotient_option() -> argparse.ArgumentParser:
    """--no-quotient: the spec's order-only domains searched up to their caps, not renumbered."""
    p = _parent()
    p.add_argument("--no-quotient", action="store_true",
                   help="search the spec's order-only domains (generations) up to their caps "
                        "instead of renumbering them by rank")
    return p


def model_options(all_variants: bool = False) -> list[argparse.ArgumentParser]:
    """The options that name a model: SPEC, --variant, --param."""
    return [spec_option(), variant_option(all_variants), param_option()]


# ---------------------------------------------------------------------------------------------
# Progress on stderr

# Seconds between two plain progress lines when stderr is not a terminal (a CI log)
PROGRESS_EVERY = 10.0


# `kcheck check --engine`: the engines that answer check's question (every verdict, the same
# shortest traces); --spark [MASTER] and --partition are the older spellings, kept as aliases
ENGINES = ("bfs", "spark-slices", "spark-ownership")
# the masters Spark accepts: a local one, a standalone cluster (host:port, or several for a
# master with standbys), or a cluster manager's URL
_MASTER = re.compile(r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]"
                     r"|spark://[^\s:/,]+:\d+(,[^\s:/,]+:\d+)*|yarn|(k8s|mesos)://\S+")


def master(text: str) -> str:
    """An argparse type: a Spark master URL. A wrong one is refused before anything starts (a
    search small enough for the driver's prefix never reaches Spark, and would else succeed
    with a master that cannot)."""
    if not _MASTER.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Spark master; one of local[*], local[N], "
            f"spark://HOST:PORT, yarn, k8s://..., mesos://...")
    return text


def add_engine_options(ck) -> None:
    """check's options that choose the engine and configure Spark."""
    ck.add_argument("--engine", choices=ENGINES, default=None,
                    help="bfs: the single-process search (the default); spark-slices: Spark, "
                         "slices of the initial states or of a frontier, each searched whole; "
                         "spark-ownership: Spark, each state explored once by the owner of its "
                         "fingerprint, level by level")
    ck.add_argument("--spark", nargs="?", const="local[*]", metavar="MASTER", type=master,
                    help="explore on Spark: local[*] by default, spark://host:port for a cluster "
                         "(alone: --engine spark-slices)")
    ck.add_argument("--slices", type=positive("--slices"), metavar="N",
                    help="with a Spark engine: slices of the state space, or owners with "
                         "spark-ownership (default: Spark's cores)")
    ck.add_argument("--partition", choices=["slices", "ownership"], default=None,
                    help="with --spark: the same as --engine spark-slices / spark-ownership")
    ck.add_argument("--verbose", action="store_true", help="with a Spark engine: Spark's own log")


def engine(args) -> str:
    """The engine that check's options choose: --engine, or its aliases --spark/--partition."""
    chosen = getattr(args, "engine", None)
    partition = getattr(args, "partition", None)
    if chosen is None:
        if not getattr(args, "spark", None):
            if partition or getattr(args, "slices", None):
                raise BadInput("--partition needs --spark" if partition else "--slices needs --spark")
            return "bfs"
        return f"spark-{partition or 'slices'}"
    if chosen == "bfs":
        for flag in ("spark", "slices", "partition"):
            if getattr(args, flag, None):
                raise BadInput(f"--{flag} is for a Spark engine, not --engine bfs")
        return chosen
    if partition and f"spark-{partition}" != chosen:
        raise BadInput(f"--partition {partition} contradicts --engine {chosen}; give one of them")
    return chosen



def spark_progress(verbose: bool, what: str | None):
    """The progress of a Spark run: a status line on a terminal, lines on stderr with --verbose,
    else nothing -> (a rich Live to enter or None, update function or None). ``what``: the unit
    of work counted (slices, configurations); None for the ownership engine's levels."""
    err = make_console(stderr=True)
    live = None
    if err.is_terminal:
        from rich.live import Live
        live = Live(console=err, transient=True, refresh_per_second=4)
    elif not verbose:
        return None, None

    def say(msg: str):
        live.update(msg) if live is not None else err.print(msg, markup=False)
    if what is None:
        def update(depth, distinct, frontier):
            say(f"level {depth}: {distinct:,} distinct states, {frontier:,} new")
    else:
        def update(done, total, states):
            say(f"{what} done {done}/{total}, {states:,} states so far"
                + (" (duplicates included)" if live is not None else ""))
    return live, update


class Progress:
    """Progress of a long run on stderr: a live line naming spec, variant and properties on a
    terminal; one plain line every PROGRESS_EVERY seconds otherwise (KCHECK_PROGRESS_SECONDS),
    so a CI log moves. Standard output keeps only results."""

    def __init__(self, label: str):
        self.label, self.time = label, time.monotonic
        self.err = make_console(stderr=True)
        self.every = float(os.environ.get("KCHECK_PROGRESS_SECONDS", PROGRESS_EVERY))
        self.last = self.time()
        self.live = None
        if self.err.is_terminal:
            from rich.live import Live
            self.live = Live(console=self.err, transient=True, refresh_per_second=4)

    def __enter__(self):
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live is not None:
            self.live.__exit__(*exc)

    def __call__(self, depth, distinct, left):
        text = f"{self.label}: depth {depth}, {distinct:,} distinct states, {left:,} left in this level"
        if self.live is not None:
            self.live.update(text)
        elif self.time() - self.last >= self.every:
            self.last = self.time()
            self.err.print(f"kcheck: {text}", markup=False, soft_wrap=True)
