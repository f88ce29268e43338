# Order at exit: non-daemon threads are joined, then atexit handlers run.
import atexit
import threading
import time

atexit.register(print, "atexit handler")
main_done = threading.Event()


def slow():
    main_done.wait()
    time.sleep(0.2)
    print("thread finished")


threading.Thread(target=slow).start()
print("main done")
main_done.set()
