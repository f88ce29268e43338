# Python's startup signal set-up: SIGINT raises KeyboardInterrupt, SIGPIPE is ignored.
import os
import signal

print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)
print(signal.getsignal(signal.SIGPIPE))
print(signal.getsignal(signal.SIGTERM))
r, w = os.pipe()
os.close(r)
try:
    os.write(w, b"x")
except BrokenPipeError as e:
    print("BrokenPipeError", e.errno)
