"""Find a spec by shipped name or by the path of a user's module, with errors that point at
the user's line."""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import traceback
from pathlib import Path

from kcheck.spec import SHIPPED
from kcheck.spec.lang import Spec, SpecError


_ENGINES = Path(__file__).resolve().parent                       # kcheck (checker/)
_SPECS = Path(importlib.import_module("kcheck.spec").__file__).resolve().parent   # kcheck.spec


def _kchecks_own(filename: str) -> bool:
    """A frame of kcheck's engines or of its spec language; a shipped spec counts as a user's."""
    path = Path(filename).resolve()
    if path.is_relative_to(_SPECS):
        return path.name == "lang.py"
    return path.is_relative_to(_ENGINES)


def user_line(exc: BaseException) -> str:
    """The innermost traceback frame outside kcheck itself, as file:line."""
    best = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if not _kchecks_own(fr.filename):
            best = fr
    if best is None:
        return "?"
    return f"{best.filename}:{best.lineno}"


# kcheck's modules before they were one package (`from spec.lang import ...`)
_OLD_PACKAGES = ("spec", "checker")


def _old_import(e: ModuleNotFoundError, path: Path) -> str | None:
    """A user's spec written for kcheck's old top-level packages: what to write instead."""
    if not e.name or e.name.split(".")[0] not in _OLD_PACKAGES:
        return None
    for fr in reversed(traceback.extract_tb(e.__traceback__)):
        if fr.line and (fr.line.startswith(("from spec", "import spec", "from checker",
                                            "import checker"))):
            return (f"{fr.filename}:{fr.lineno}: '{fr.line}' imports kcheck's old package "
                    f"'{e.name.split('.')[0]}': the spec language is `from kcheck import Spec, "
                    f"Int, Bool, ...` (and kcheck's engines are kcheck.*)")
    return None


# A spec module is Python source a person wrote: kcheck's largest is under 100 KB
MAX_SPEC_BYTES = 16 << 20


def _is_file(path: str) -> bool:
    """Path.is_file, False for a name the system refuses to look up (too long, a NUL byte)."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def load_spec(name_or_path: str) -> Spec:
    if name_or_path in SHIPPED:
        try:
            module = importlib.import_module(SHIPPED[name_or_path])
        except SpecError:
            raise
        except SystemExit as e:
            raise SpecError(f"{user_line(e)}: loading spec {name_or_path} called "
                            f"sys.exit({e.code!r})") from None
        except SyntaxError as e:
            raise SpecError(f"{e.filename}:{e.lineno}: syntax error in spec: {e.msg}") from None
        except Exception as e:
            raise SpecError(f"{user_line(e)}: loading spec {name_or_path} raised "
                            f"{type(e).__name__}: {e}") from None
    elif name_or_path.endswith(".py") or "/" in name_or_path or _is_file(name_or_path) \
            or _is_file(name_or_path + ".py"):
        path = Path(name_or_path)
        if not _is_file(name_or_path) and not name_or_path.endswith(".py") and _is_file(name_or_path + ".py"):
            path = Path(name_or_path + ".py")
        if len(name_or_path.encode()) > 4096 or any(len(part.encode()) > 255 for part in path.parts):
            raise SpecError(f"spec path {name_or_path[:60]}... is longer than a file name can be; "
                            f"give the path of a spec module or a shipped spec: {', '.join(SHIPPED)}")
        if path.is_dir():
            raise SpecError(f"{name_or_path} is a folder; give the path of a spec module (a .py "
                            f"file) or a shipped spec: {', '.join(SHIPPED)}")
        if path.exists() and not path.is_file():
            raise SpecError(f"{name_or_path} is not a regular file (a device, a pipe, a socket); "
                            f"give the path of a spec module (a .py file)")
        if not path.is_file():
            raise SpecError(f"spec file {name_or_path} does not exist; shipped specs: {', '.join(SHIPPED)}")
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise SpecError(f"{name_or_path} is larger than {MAX_SPEC_BYTES >> 20} MB: not a spec "
                            f"module (the largest shipped spec is under 100 KB)")
        mod_name = f"kcheck_user_{abs(hash(str(path.resolve())))}"
        # any file name will do (a spec kept without .py): load it as Python source explicitly
        source_loader = importlib.machinery.SourceFileLoader(mod_name, str(path))
        loader_spec = importlib.util.spec_from_loader(mod_name, source_loader, origin=str(path))
        module = importlib.util.module_from_spec(loader_spec)
        module.__file__ = str(path)
        sys.modules[mod_name] = module
        # a spec may import modules kept beside it, as a script imports its neighbours
        folder = str(path.resolve().parent)
        added = folder not in sys.path
        if added:
            sys.path.insert(0, folder)
        try:
            loader_spec.loader.exec_module(module)
        except SpecError:
            raise
        except ValueError as e:
            if "source code string cannot contain null bytes" in str(e):
                raise SpecError(f"{name_or_path} is not a Python source file") from None
            raise SpecError(f"{user_line(e)}: loading the spec raised {type(e).__name__}: {e}") from None
        except SyntaxError as e:
            if "null bytes" in str(e.msg):
                raise SpecError(f"{name_or_path} is not a Python source file (it holds null "
                                f"bytes)") from None
            raise SpecError(f"{e.filename or path}:{e.lineno or '?'}: syntax error in spec: "
                            f"{e.msg}") from None
        except UnicodeDecodeError:
            raise SpecError(f"{name_or_path} is not a Python source file (not UTF-8 text)") from None
        except ModuleNotFoundError as e:
            raise SpecError(_old_import(e, path) or f"{user_line(e)}: loading the spec raised "
                            f"{type(e).__name__}: {e}") from None
        except SystemExit as e:
            # a spec that exits would end kcheck with the spec's status and nothing printed
            raise SpecError(f"{user_line(e)}: loading the spec called sys.exit({e.code!r}); a spec "
                            f"module defines a Spec and returns") from None
        except Exception as e:
            raise SpecError(f"{user_line(e)}: loading the spec raised {type(e).__name__}: {e}") from None
        finally:
            if added and folder in sys.path:
                sys.path.remove(folder)
    else:
        raise SpecError(f"unknown spec '{name_or_path}'; shipped specs: {', '.join(SHIPPED)} "
                        f"(or give the path of a spec module)")
    spec = getattr(module, "spec", None)
    if not isinstance(spec, Spec):
        raise SpecError(f"{name_or_path}: the module defines no Spec object named 'spec'")
    _check_precedence(getattr(module, "__file__", None))
    spec.validate()
    _check_known_bugs(spec)
    return spec


_PRECEDENCE_LOCK = threading.Lock()
_PRECEDENCE_CHECKED: set = set()


def _check_precedence(path: str | None) -> None:
    """Once per file and process, under a lock: Spark's owners as threads load specs at once, and
    CPython 3.11's ast.parse run in two threads together fails ("AST constructor recursion depth
    mismatch")."""
    with _PRECEDENCE_LOCK:
        if path in _PRECEDENCE_CHECKED:
            return
        _check_precedence_of(path)
        _PRECEDENCE_CHECKED.add(path)


def _check_precedence_of(path: str | None) -> None:
    """In the spec language & and | are And and Or, and Python binds them tighter than ==, != and
    the orderings: `a == b & c` is `a == (b & c)`, a different condition from the one it reads
    as. At run time the parentheses are gone, so the spec's source is read: a comparison whose
    operand is an & or | written without parentheses is refused with its line and both
    readings."""
    import ast
    if not path or not path.endswith(".py"):
        return
    try:
        source = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return      # loaded already: what Python could not parse here it reported there
    lines = source.splitlines()

    def parenthesised(node) -> bool:
        before = lines[node.lineno - 1][:node.col_offset].rstrip()
        after = lines[node.end_lineno - 1][node.end_col_offset:].lstrip()
        return before.endswith("(") and after.startswith(")")

    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            if isinstance(operand, ast.BinOp) and isinstance(operand.op, (ast.BitAnd, ast.BitOr)) \
                    and not parenthesised(operand):
                text = ast.get_source_segment(source, node)
                part = ast.get_source_segment(source, operand)
                raise SpecError(f"{path}:{node.lineno}: '{text}' compares with '{part}': Python "
                                f"binds & and | tighter than comparisons, so it reads "
                                f"'{text.replace(part, f'({part})', 1)}'; add the parentheses "
                                f"you mean, or write And(...) / Or(...)")


def _check_known_bugs(spec: Spec) -> None:
    """A known bug names a variant and a property of this spec, or the check of it is vacuous."""
    props = set(spec.properties) | set(spec.progress) | {"deadlock"}
    for bug in spec.known_bugs:
        where = bug.line if bug.line != "?" else spec.source_file
        if bug.variant is not None and bug.variant not in spec.variants:
            raise SpecError(f"{where}: known bug {bug.jira} names unknown variant "
                            f"'{bug.variant}'; variants: {', '.join(spec.variants)}")
        if bug.property is not None and bug.property not in props:
            raise SpecError(f"{where}: known bug {bug.jira} names unknown property "
                            f"'{bug.property}'; properties: {', '.join(sorted(props))}")
        if bug.variant is not None and bug.property not in spec.variants[bug.variant].expected_violations:
            raise SpecError(f"{where}: known bug {bug.jira}: variant {bug.variant} does "
                            f"not record {bug.property} as violated (violates=[...])")
