# 70 processes alive at once.
import os
import time

children = []
try:
    for _ in range(70):
        pid = os.fork()
        if pid == 0:
            time.sleep(2)
            os._exit(0)
        children.append(pid)
    print("forked", len(children))
except BlockingIOError as e:
    print("fork failed:", type(e).__name__)
finally:
    for pid in children:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
