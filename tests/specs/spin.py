"""A worker that may spin for ever before it finishes: an unfair cycle.

Properties (progress):
- finishes: the worker eventually finishes, when finishing is fair.
- finishes-spin-fair: the worker eventually finishes, when only spinning is fair.
"""
from kcheck import Bool, Int, Spec

spec = Spec("spin", __doc__)


@spec.state
def state(p):
    return {"x": Int(0, 1), "done": Bool}


@spec.init
def init(p):
    yield {"x": 0, "done": False}


@spec.action
def Spin(s, p):
    """The worker spins."""
    s.require(~s.done)
    s.x = 1 - s.x


@spec.action
def Finish(s, p):
    """The worker finishes."""
    s.require(~s.done)
    s.done = True


@spec.always_eventually("finishes", fair=["Finish"])
def finishes(s, p):
    """The worker eventually finishes."""
    return s.done


@spec.always_eventually("finishes-spin-fair", fair=["Spin"])
def finishes_spin(s, p):
    """The worker eventually finishes even though only spinning is fair."""
    return s.done


spec.variant("spin", "as above", default=True, violates=["finishes-spin-fair"])
