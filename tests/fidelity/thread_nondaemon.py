# Python waits for non-daemon threads before it exits.
import threading
import time

main_done = threading.Event()


def late():
    main_done.wait()
    time.sleep(0.3)  # still running when the main module has finished
    print("thread: done after a wait")


threading.Thread(target=late).start()
print("main: reached the end")
main_done.set()
