def cleanup():
    raise RuntimeError("cleanup failed too")


try:
    {}["missing"]
except KeyError:
    cleanup()
