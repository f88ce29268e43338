def check(values):
    errors = []
    for v in values:
        if v < 0:
            errors.append(ValueError(f"negative: {v}"))
        elif v == 0:
            errors.append(ZeroDivisionError("zero"))
    if errors:
        raise ExceptionGroup("invalid values", errors)


try:
    check([1, -1, 0])
except* ZeroDivisionError as eg:
    print("handled", [str(e) for e in eg.exceptions])
