# Death by a signal: buffered stdout is lost, the status is the signal.
import os
import signal

print("buffered, lost")
os.kill(os.getpid(), signal.SIGTERM)
