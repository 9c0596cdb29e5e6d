"""Locust (FastHttpUser) posting one streaming chat request (16 output tokens) per task.

Each user runs at a constant throughput of LOCUST_PER_USER requests/s, so users x per-user
gives the offered rate. The whole SSE body is read, so the reported response time is E2E.
"""

import os

from locust import FastHttpUser, constant_throughput, task

PER_USER = float(os.environ.get("LOCUST_PER_USER", "1"))
TOKENS = int(os.environ.get("LOCUST_MAX_TOKENS", "16"))
BODY = {"model": "ok", "stream": True, "max_tokens": TOKENS, "messages": [{"role": "user", "content": "word " * 64}]}


class StreamingChat(FastHttpUser):
    wait_time = constant_throughput(PER_USER)
    concurrency = 1

    @task
    def chat(self) -> None:
        self.client.post("/v1/chat/completions", json=BODY)
