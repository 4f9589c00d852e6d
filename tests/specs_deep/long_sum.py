"""An invariant whose sum is built term by term in a loop, as a newcomer writes it: an expression
N additions deep (N from the environment, default 600). Every engine walks the tree recursively;
at 600 terms check and bmc ended in RecursionError (issue 36)."""
import os

from kcheck import Int, Spec

TERMS = int(os.environ.get("KCHECK_TEST_TERMS", "600"))

spec = Spec("long_sum", __doc__)


@spec.state
def state(p):
    return {"x": Int(0, 3)}


@spec.init
def init(p):
    yield {"x": 0}


@spec.action()
def Step(s, p):
    s.require(s.x < 3)
    s.x = s.x + 1


@spec.invariant("small")
def small(s, p):
    """TERMS copies of x add up to less than twice TERMS."""
    total = s.x
    for _ in range(TERMS - 1):
        total = total + s.x
    return total < 2 * TERMS
