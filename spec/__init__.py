"""kcheck specs and the spec language (spec.lang)."""

# The shipped specs, by the name users type; the main job checks each at its default bounds.
SHIPPED = {
    "two_phase": "kcheck.spec.examples.two_phase",
    "producer": "kcheck.spec.producer",
    "classic_group": "kcheck.spec.classic_group",
    "consumer_group": "kcheck.spec.consumer_group",
    "shared_consumption": "kcheck.spec.shared_consumption",
}
