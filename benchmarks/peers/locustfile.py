"""Locust (FastHttpUser) posting one streaming chat request (16 output tokens) per task.

Each user runs at a constant throughput of LOCUST_PER_USER requests/s, so users x per-user
gives the offered rate. The whole SSE body is read, so the reported response time is E2E.
When LOCUST_STARTS names a file, every request's start time (``time.time()``, as Locust's
request event reports it) is written there per user at the end, so the benchmark can hold
each user to its own schedule (first start + k / per-user rate), the schedule-lag criterion
the other tools are held to.
"""

import json
import os
from collections import defaultdict

from locust import FastHttpUser, constant_throughput, events, task

PER_USER = float(os.environ.get("LOCUST_PER_USER", "1"))
TOKENS = int(os.environ.get("LOCUST_MAX_TOKENS", "16"))
STARTS = os.environ.get("LOCUST_STARTS")
BODY = {"model": "ok", "stream": True, "max_tokens": TOKENS, "messages": [{"role": "user", "content": "word " * 64}]}
_starts: dict[int, list[float]] = defaultdict(list)


class StreamingChat(FastHttpUser):
    wait_time = constant_throughput(PER_USER)
    concurrency = 1

    @task
    def chat(self) -> None:
        self.client.post("/v1/chat/completions", json=BODY, context={"user": id(self)})


@events.request.add_listener
def _note_start(start_time: float, context: dict, **_: object) -> None:
    if STARTS:
        _starts[context.get("user", 0)].append(start_time)


@events.quitting.add_listener
def _write_starts(**_: object) -> None:
    if STARTS:
        with open(STARTS, "w") as f:
            json.dump(list(_starts.values()), f)
