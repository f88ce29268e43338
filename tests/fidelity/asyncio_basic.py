import asyncio


async def worker(name, delay, log):
    await asyncio.sleep(delay)
    log.append(name)
    return name.upper()


async def main():
    log = []
    results = await asyncio.gather(worker("b", 0.02, log), worker("a", 0.0, log))
    print(results, log)
    try:
        await asyncio.wait_for(asyncio.sleep(10), timeout=0.01)
    except TimeoutError:
        print("timed out")


asyncio.run(main())
