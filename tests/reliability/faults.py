"""A fault-injecting wrapper for LoopbackServer handlers: seeded random 429 with Retry-After,
5xx bursts, connection resets, slow responses and truncated bodies in front of a correct
handler. Deterministic for a seed, so a failing run can be replayed exactly."""
from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field

from basecrawler.testing import Reply, Request


@dataclass
class FaultPlan:
    rate_limited: float = 0.05      # probability of a 429 (Retry-After: 0 or 1)
    server_error: float = 0.08      # probability of starting a 5xx burst
    burst_length: int = 2           # consecutive 5xx answers in a burst
    reset: float = 0.04             # connection dropped without an answer
    truncated: float = 0.04         # Content-Length promised, body cut short
    slow: float = 0.05              # answer delayed
    slow_delay_s: float = 0.05
    seed: int = 1
    # The first requests get one fault of each kind in turn, so even a source that makes
    # only a handful of requests meets every fault at least once.
    forced_first: tuple = ("429", "5xx", "reset", "truncated", "slow")


@dataclass
class FaultInjector:
    inner: callable
    plan: FaultPlan = field(default_factory=FaultPlan)
    enabled: bool = True

    def __post_init__(self):
        self._random = random.Random(self.plan.seed)
        self._lock = threading.Lock()
        self._burst_left = 0
        self.injected: Counter = Counter()

    def __call__(self, request: Request) -> Reply:
        reply = self.inner(request)
        if not self.enabled:
            return reply
        with self._lock:
            if self._burst_left > 0:
                self._burst_left -= 1
                self.injected["5xx"] += 1
                return Reply(503)
            plan = self.plan
            self._served = getattr(self, "_served", 0) + 1
            roll = self._random.random()
            forced = plan.forced_first[self._served - 1] if self._served <= len(plan.forced_first) else None
            edges = [
                ("429", plan.rate_limited), ("5xx", plan.server_error), ("reset", plan.reset),
                ("truncated", plan.truncated), ("slow", plan.slow),
            ]
            kind, upper = forced, 0.0
            for name, probability in ([] if forced else edges):
                upper += probability
                if roll < upper:
                    kind = name
                    break
            if kind is None:
                return reply
            self.injected[kind] += 1
            if kind == "429":
                return Reply(429, headers={"Retry-After": str(self._random.choice((0, 1)))})
            if kind == "5xx":
                self._burst_left = plan.burst_length - 1
                return Reply(self._random.choice((500, 502, 503, 504)))
            if kind == "reset":
                return Reply(drop_connection=True)
        if kind == "truncated" and reply.status == 200 and len(reply.body) > 1:
            body = reply.body.encode() if isinstance(reply.body, str) else reply.body
            return Reply(reply.status, body=body, headers=reply.headers, truncate_to=len(body) // 2)
        if kind == "slow":
            return Reply(reply.status, body=reply.body, headers=reply.headers, delay_s=self.plan.slow_delay_s)
        return reply
