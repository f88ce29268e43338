"""The wire protocol: frames of a 4-byte big-endian length and UTF-8 JSON.

The host and the server speak it (over stdin/stdout or the control socket); so do a
run's processes among themselves (reports, the RPC between program and checker).
"""

import json
import os
import struct
from typing import Any

HEADER = struct.Struct(">I")
#: The largest frame a reader accepts (a run's result is capped at this much JSON).
MAX_RESULT_BYTES = 64 << 20


def write_frame(fd: int, obj: Any) -> None:
    data = json.dumps(obj, default=str).encode("utf-8", errors="surrogatepass")
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


class FrameReader:
    """Length-prefixed JSON frames from a file descriptor."""

    def __init__(self, fd: int, limit: int = MAX_RESULT_BYTES) -> None:
        self.fd = fd
        self.limit = limit
        self.buf = bytearray()
        self.eof = False
        self.total = 0

    def feed(self) -> None:
        try:
            chunk = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.eof = True
        self.total += len(chunk)
        self.buf += chunk

    def next(self) -> "dict[str, Any] | None":
        if len(self.buf) < HEADER.size:
            return None
        (size,) = HEADER.unpack_from(self.buf)
        if size > self.limit:
            self.eof = True  # not a peer that follows the protocol
            self.buf.clear()
            return None
        if len(self.buf) < HEADER.size + size:
            return None
        data = bytes(self.buf[HEADER.size : HEADER.size + size])
        del self.buf[: HEADER.size + size]
        try:
            frame = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, or nested past what is read
            return {"op": "malformed"}
        return frame if isinstance(frame, dict) else {"op": "malformed"}

    def wait(self) -> "dict[str, Any] | None":
        """Block until a frame or EOF (None)."""
        while True:
            frame = self.next()
            if frame is not None or self.eof:
                return frame
            self.feed()


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)
