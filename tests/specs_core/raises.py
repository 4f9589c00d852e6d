"""A user spec whose action raises: kcheck must name this file's line."""
from kcheck import Spec, Int

spec = Spec("raises")


@spec.state
def state(p):
    return {"x": Int(0, 3)}


@spec.init
def init(p):
    yield {"x": 0}


@spec.action
def Boom(s, p):
    s.require(s.x == 0)
    s.x = {}["missing"]  # KeyError on purpose
