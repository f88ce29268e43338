# Python waits for non-daemon threads before it exits.
import threading
import time


def late():
    time.sleep(0.3)
    print("thread: done after a wait")


threading.Thread(target=late).start()
print("main: reached the end")
