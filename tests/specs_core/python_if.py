"""A user spec that branches on a state value with a Python 'if' (not allowed)."""
from kcheck import Spec, Int

spec = Spec("python_if")


@spec.state
def state(p):
    return {"x": Int(0, 3)}


@spec.init
def init(p):
    yield {"x": 0}


@spec.action
def Step(s, p):
    if s.x < 3:
        s.x = s.x + 1
