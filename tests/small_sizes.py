"""A variant at the tests' small sizes, with its own mechanism kept.

A variant is the default with one named change, and several make that change through a parameter
(consumer_group's kafka-19233 sets lost_responses=1, producer's kafka-8483 max_in_flight=4).
Shrinking the spec's defaults instead of the variant's own settings switched that change off: the
cross-checks then compared the engines on the default model under another name."""


def small_params(spec, variant, most) -> dict:
    """The variant's parameters (the spec's defaults, the variant's own settings over them), each
    brought down to at most ``most(param)`` and no lower than its least value."""
    own = spec.variants[variant].params if variant in spec.variants else {}
    return {p.name: max(p.lo, min(own.get(p.name, p.default), most(p)))
            for p in spec.params.values()}


def least_params(spec, variant) -> dict:
    """Every parameter at its least value, but the variant's own settings at most one above
    theirs (a switch such as lost_responses=1 stays on): for a test that must stay small."""
    own = spec.variants[variant].params if variant in spec.variants else {}
    return {p.name: max(p.lo, min(own.get(p.name, p.lo), p.lo + 1)) for p in spec.params.values()}
