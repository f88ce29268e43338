import multiprocessing as mp
import sys


def child(q, n):
    q.put(("child", n, __name__))
    sys.exit(n)


if __name__ == "__main__":
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q, 3))
    p.start()
    print(q.get())
    p.join()
    print("exitcode", p.exitcode, p.name)
