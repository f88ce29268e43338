import concurrent.futures as cf
import multiprocessing as mp


class Job:
    def __init__(self, n):
        self.n = n

    def run(self):
        return self.n * 10


def run_job(job):
    return job.run()


if __name__ == "__main__":
    with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as ex:
        print(list(ex.map(run_job, [Job(i) for i in range(5)])))
