class Weird(Exception):
    def __str__(self):
        raise RuntimeError("no str for you")


raise Weird()
