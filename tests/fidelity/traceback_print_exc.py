# A program printing a traceback itself (traceback module, reads the source lines).
import traceback


def parse(s):
    return int(s)


try:
    parse("x1")
except ValueError:
    traceback.print_exc()
    print("".join(traceback.format_stack(limit=1)).strip().splitlines()[-1])
print("recovered")
