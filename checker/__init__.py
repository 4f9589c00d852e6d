"""kcheck engines, traces, rendering and the command line."""
