"""placeholder until written"""


def register(sub) -> dict:
    return {}
