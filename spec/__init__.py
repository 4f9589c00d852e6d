"""kcheck specs and the spec language (spec.lang)."""

# The shipped specs, by the name users type; the main job checks each at its default bounds.
SHIPPED = {
    "two_phase": "spec.examples.two_phase",
    "producer": "spec.producer",
    "classic_group": "spec.classic_group",
    "consumer_group": "spec.consumer_group",
    "shared_consumption": "spec.shared_consumption",
}
