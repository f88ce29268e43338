# Nothing of the runner's is left in the interpreter state a program starts with.
import faulthandler
import sys
import threading

print(sys.exc_info(), sys.gettrace(), sys.getprofile(), faulthandler.is_enabled())
print(sys.excepthook is sys.__excepthook__, sys.displayhook is sys.__displayhook__,
      threading.excepthook is threading.__excepthook__, sys.unraisablehook is sys.__unraisablehook__)
print(threading.active_count(), threading.current_thread().name, sys.flags.inspect)
print(sys.stdout is sys.__stdout__, sys.stderr is sys.__stderr__, sys.stdin is sys.__stdin__)
