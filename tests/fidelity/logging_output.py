import logging

logging.basicConfig(level=logging.INFO, format="%(levelname)s:%(name)s:%(funcName)s:%(message)s")
log = logging.getLogger("app")


def work():
    log.info("working")
    try:
        1 / 0
    except ZeroDivisionError:
        log.exception("it failed")


work()
logging.warning("root warning from %s", __name__)
