"""A spec with an action whose guard can never hold in a reachable state: a property about it
would hold vacuously, so kcheck names it."""
from kcheck import Int, Spec

spec = Spec("never-fires", __doc__)


@spec.state
def state(p):
    return {"x": Int(0, 3)}


@spec.init
def init(p):
    yield {"x": 0}


@spec.action
def Step(s, p):
    """x grows to 2."""
    s.require(s.x < 2)
    s.x = s.x + 1


@spec.action
def Reset(s, p):
    """x goes back to 0 from 3, which is never reached."""
    s.require(s.x == 3)
    s.x = 0


@spec.action(n=[])
def Nothing(s, p, n):
    """An action with no arguments to take: no instance at all."""
    s.x = n


@spec.transition_property("reset-clears", actions=["Reset"])
def reset_clears(pre, post, action, args, outcome, p):
    """A reset leaves x at 0."""
    return post.x == 0
