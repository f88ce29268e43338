# An uncaught KeyboardInterrupt: traceback, then Python dies from SIGINT.
def wait_forever():
    print("pretending the user pressed Ctrl-C")
    raise KeyboardInterrupt


wait_forever()
