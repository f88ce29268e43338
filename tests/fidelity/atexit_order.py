import atexit


def bye(name):
    print("atexit:", name)


atexit.register(bye, "first registered")
atexit.register(bye, "second registered")


@atexit.register
def last():
    print("atexit: decorator, runs first")


print("end of program")
