"""kcheck specs and the spec language (spec.lang)."""

# The shipped specs, by the name users type; the main job checks each at its default bounds.
SHIPPED = {
    "two_phase": "spec.examples.two_phase",
}
