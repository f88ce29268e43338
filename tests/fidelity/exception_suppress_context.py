def lookup(d, k):
    try:
        return d[k]
    except KeyError:
        raise LookupError(f"no {k}") from None


lookup({}, "x")
