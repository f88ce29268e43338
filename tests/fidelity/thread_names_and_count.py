import threading


def work(results, i):
    results.append(i * i)


print(threading.active_count(), threading.current_thread().name)
print(threading.current_thread() is threading.main_thread())
results = []
threads = [threading.Thread(target=work, args=(results, i)) for i in range(4)]
print([t.name for t in threads])
for t in threads:
    t.start()
for t in threads:
    t.join()
print(sorted(results), threading.active_count())
