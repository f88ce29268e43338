"""Fair sharing of the service's run slots among students.

One run per student at a time (a second waits behind their first); students are
served in turn (round-robin), so one student's flood of requests waits behind
everybody else's next run instead of filling the slots. Lives on the service's event
loop (no locks): :meth:`FairQueue.submit` gives a :class:`Ticket` whose ``changed``
event fires whenever its place moves, and whose ``started`` fires when a slot is its.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass, field


class QueueFull(Exception):
    """This student already has as many runs waiting as the service allows."""


@dataclass(eq=False)
class Ticket:
    user: str
    number: int
    started: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False


class FairQueue:
    def __init__(self, slots: int, waiting_per_user: int) -> None:
        self.slots = slots
        self.waiting_per_user = waiting_per_user
        self.running: dict[str, Ticket] = {}
        self.waiting: dict[str, deque[Ticket]] = {}
        self.served: dict[str, int] = {}
        """When each student's last run started (a dispatch count): who waited longest since
        their last turn goes first, a student never served before anyone."""
        self._numbers = itertools.count(1)
        self._dispatches = itertools.count(1)

    def turns(self) -> list[str]:
        """Students with runs waiting, in the order they are served next."""
        return sorted(self.waiting, key=lambda u: (self.served.get(u, 0), self.waiting[u][0].number))

    def submit(self, user: str) -> Ticket:
        line = self.waiting.get(user)
        if line is not None and len(line) >= self.waiting_per_user:
            raise QueueFull(user)
        ticket = Ticket(user, next(self._numbers))
        if line is None:
            self.waiting[user] = line = deque()
        line.append(ticket)
        self._dispatch()
        return ticket

    def release(self, ticket: Ticket) -> None:
        """The ticket's run ended (or it was withdrawn while waiting)."""
        if ticket.done:
            return
        ticket.done = True
        if self.running.get(ticket.user) is ticket:
            del self.running[ticket.user]
        else:
            line = self.waiting.get(ticket.user)
            if line is not None and ticket in line:
                line.remove(ticket)
                if not line:
                    del self.waiting[ticket.user]
        self._dispatch()

    def ahead(self, ticket: Ticket) -> int:
        """How many waiting runs start before this one: round by round, each student's
        next run in turn order (their own earlier runs first)."""
        order = self.turns()
        count = 0
        for depth in itertools.count():
            for user in order:
                line = self.waiting[user]
                if depth < len(line):
                    if line[depth] is ticket:
                        return count
                    count += 1
            if all(depth >= len(self.waiting[u]) for u in order):
                break
        return count

    def _dispatch(self) -> None:
        while len(self.running) < self.slots:
            user = next((u for u in self.turns() if u not in self.running), None)
            if user is None:
                break
            line = self.waiting[user]
            ticket = line.popleft()
            if not line:
                del self.waiting[user]
            self.served[user] = next(self._dispatches)  # their next run goes behind everybody else's
            self.running[user] = ticket
            ticket.started.set()
        for line in self.waiting.values():
            for waiting in line:
                waiting.changed.set()

    @property
    def queued(self) -> int:
        return sum(len(line) for line in self.waiting.values())
