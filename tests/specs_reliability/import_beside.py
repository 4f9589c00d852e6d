"""A spec that keeps a helper module beside it, as users do."""
from kcheck import Int, Spec

from beside_helper import LIMIT

spec = Spec("import-beside", __doc__)


@spec.state
def state(p):
    return {"x": Int(0, LIMIT)}


@spec.init
def init(p):
    yield {"x": 0}


@spec.action
def Step(s, p):
    """x grows to LIMIT."""
    s.require(s.x < LIMIT)
    s.x = s.x + 1


@spec.invariant("bounded")
def bounded(s, p):
    """x never passes LIMIT."""
    return s.x <= LIMIT
