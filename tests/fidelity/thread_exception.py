# An exception in a thread goes through threading.excepthook; the exit code stays 0.
import threading


def work():
    raise ValueError("boom in a thread")


t = threading.Thread(target=work)
t.start()
t.join()
print("main continues")
