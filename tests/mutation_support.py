"""One-point mutations of a spec, generated mechanically from its source's expression trees
(tests/test_conform_mutations.py uses them; issue 33's mutation adequacy).

Within every function the spec registers as an action or a rule (``@spec.action``,
``@spec.rule``):

- every comparison operator is flipped to its neighbour: ``<`` <-> ``<=``, ``>`` <-> ``>=``,
  ``==`` <-> ``!=``;
- every error-code literal (an attribute of the spec's outcome enum, ``Error.X``) of an action is
  swapped with each other code that action can answer (exhaustive.answerable_outcomes of the
  unmutated spec).

A mutation is applied as a text edit of the operator or the code's name (the source is otherwise
unchanged: comments and line numbers stay), written to a temporary copy of the spec's module and
loaded from there with loader.load_spec."""
from __future__ import annotations

import ast
import random
from dataclasses import dataclass, field
from pathlib import Path

FLIP = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">", ast.Eq: "!=", ast.NotEq: "=="}
TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


@dataclass(frozen=True)
class Mutation:
    function: str         # the action or rule it is in
    line: int             # 1-based
    start: int            # character offsets in the line of the text replaced
    end: int
    old: str
    new: str
    # the mutated line's code, with which occurrence of OLD it is when there are several: names
    # the mutation by what it changes, so an edit elsewhere in the spec (lines moving) does not
    # rename it (not part of equality: the position is)
    code: str = field(default="", compare=False)

    @property
    def name(self) -> str:
        return f"{self.function}: {self.old} -> {self.new} in `{self.code}`"

    def apply(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        text = lines[self.line - 1]
        assert text[self.start:self.end] == self.old, (self.name, text)
        lines[self.line - 1] = text[:self.start] + self.new + text[self.end:]
        return "".join(lines)


def _registered(fn: ast.FunctionDef) -> str | None:
    """'action' or 'rule' if a decorator registers FN with the spec as one."""
    for d in fn.decorator_list:
        call = d.func if isinstance(d, ast.Call) else d
        if isinstance(call, ast.Attribute) and call.attr in ("action", "rule") and \
                isinstance(call.value, ast.Name) and call.value.id == "spec":
            return call.attr
    return None


def _operator_span(line: str, left_end: int, right_start: int, op: str) -> tuple[int, int] | None:
    """Where the operator OP lies between two operands on one line."""
    between = line[left_end:right_start]
    i = between.find(op)
    if i < 0 or between.count(op) != 1 or (op in ("<", ">") and op + "=" in between):
        return None
    return left_end + i, left_end + i + len(op)


def mutations(path: Path, outcome_enum: str, answerable: dict[str, list[str]]) -> list[Mutation]:
    """Every mutation of the spec module at PATH, in source order."""
    source = path.read_text()
    lines = source.splitlines()
    out = []
    for fn in ast.parse(source).body:
        if not isinstance(fn, ast.FunctionDef) or _registered(fn) is None:
            continue
        codes = answerable.get(fn.name, []) if _registered(fn) == "action" else []
        for node in ast.walk(fn):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                for op, a, b in zip(node.ops, operands, operands[1:]):
                    if type(op) not in FLIP or a.end_lineno != b.lineno:
                        continue
                    span = _operator_span(lines[a.end_lineno - 1], a.end_col_offset, b.col_offset,
                                          TEXT[type(op)])
                    if span:
                        out.append(Mutation(fn.name, a.end_lineno, *span, TEXT[type(op)],
                                            FLIP[type(op)]))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id == outcome_enum and node.attr in codes:
                start = node.end_col_offset - len(node.attr)
                for other in codes:
                    if other != node.attr:
                        out.append(Mutation(fn.name, node.end_lineno, start, node.end_col_offset,
                                            node.attr, other))
    return sorted({_with_code(m, lines[m.line - 1]) for m in out},
                  key=lambda m: (m.line, m.start, m.new))


def _with_code(m: Mutation, line: str) -> Mutation:
    k, n = line[:m.start].count(m.old) + 1, line.count(m.old)
    return Mutation(m.function, m.line, m.start, m.end, m.old, m.new,
                    line.strip() + (f" (#{k} of {n})" if n > 1 else ""))


def sample(all_mutations: list[Mutation], n: int, seed: int) -> list[Mutation]:
    """N of them, drawn with a fixed seed (all of them when there are fewer)."""
    return random.Random(seed).sample(all_mutations, min(n, len(all_mutations)))


def write_mutant(path: Path, mutation: Mutation, where: Path) -> Path:
    """The spec module with the mutation applied, as WHERE/<module name> (a temporary copy)."""
    target = where / path.name
    target.write_text(mutation.apply(path.read_text()))
    return target
