"""Throughput (docs/deploy.md, "Throughput"): the provider's requests and tokens per minute paced on our side and
shared by the runs of a Dagster pool, and 429s that wait what the server's retry-after says
(the real SDK against the fake Messages API)."""

from __future__ import annotations

import threading
import time

import dagster as dg
from pydantic import SecretStr

from anima_pipeline.config import Settings, in_flight
from anima_pipeline.defs.night.assets import rate_shares
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.llm.contract import Usage
from anima_pipeline.llm.ratelimit import RateLimiter
from testkit.fake_messages_api import FakeMessagesAPI, error, reply, text

KEY = "sk-ant-throughput"


class Clock:
    """A clock that only moves when the limiter sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds


def test_requests_per_minute_pace_requests_after_the_minutes_burst() -> None:
    clock = Clock()
    limiter = RateLimiter(requests_per_minute=120, clock=clock, sleep=clock.sleep)
    for _ in range(120):  # a minute's worth at once: the bucket is full
        limiter.acquire("m")
    assert clock.slept == []
    limiter.acquire("m")  # then one every 0.5 s
    limiter.acquire("m")
    assert clock.slept == [0.5, 0.5]
    limiter.acquire("other-model")  # each model has its own limits
    assert clock.slept == [0.5, 0.5]


def test_token_limits_count_uncached_input_and_cache_writes_not_reads() -> None:
    clock = Clock()
    limiter = RateLimiter(
        input_tokens_per_minute=6_000, output_tokens_per_minute=600, clock=clock, sleep=clock.sleep
    )
    limiter.acquire("m")
    limiter.record("m", Usage(input_tokens=4_000, cache_write_tokens=3_000, cache_read_tokens=90_000))
    limiter.acquire("m")  # 1,000 input tokens in debt at 100 a second: 10 s
    assert clock.slept == [10.0]
    limiter.record("m", Usage(output_tokens=900))  # output: 300 in debt at 10 a second
    limiter.acquire("m")
    assert clock.slept == [10.0, 30.0]


def test_runs_sharing_the_limits_each_take_their_share() -> None:
    clock = Clock()
    limiter = RateLimiter(requests_per_minute=120, shares=4, clock=clock, sleep=clock.sleep)
    for _ in range(30):  # a quarter of the minute's requests
        limiter.acquire("m")
    limiter.acquire("m")
    assert clock.slept == [2.0]  # 30 a minute: one every 2 s
    assert in_flight(4_000, 4, 5.0) == 84  # 1,000 a minute at 5 s a request
    s = Settings(llm={"requests_per_minute": 4_000, "rate_shares": 4})
    assert s.llm.in_flight == 84
    assert Settings(llm={"requests_per_minute": 4_000, "concurrency": 8}).llm.in_flight == 8  # set: kept
    assert Settings().llm.in_flight == 8  # no limits: the default


def test_the_night_takes_its_share_from_the_dagster_pool() -> None:
    with dg.instance_for_test() as instance:
        settings = Settings(engine="anthropic", night_shards=3)
        assert rate_shares(instance, settings) == 3  # no pool limit: every shard may run at once
        instance.event_log_storage.set_concurrency_slots("anthropic", 5)
        assert rate_shares(instance, settings) == 5


def test_a_429_waits_its_retry_after_and_pauses_the_other_requests() -> None:
    script = [error(429, "rate limited", retry_after="1"), reply(text("one")), reply(text("two"))]
    with FakeMessagesAPI(script, retry_after_ms=None) as fake:  # only `retry-after: 1` (seconds)
        engine = AnthropicEngine("claude-haiku-5-5", SecretStr(KEY), base_url=fake.url, max_retries=2)
        try:
            t0 = time.monotonic()
            said, usage = engine.complete("eval/answer", "system", "first")
            first = time.monotonic() - t0
            assert said == "one" and usage.calls == 1
            # a 429 seen by one thread holds back the others of the process for its retry-after
            engine.limiter.pause(0.5)
            out: list[float] = []

            def other() -> None:
                t = time.monotonic()
                engine.complete("eval/answer", "system", "second")
                out.append(time.monotonic() - t)

            thread = threading.Thread(target=other)
            thread.start()
            thread.join(10)
        finally:
            engine.close()
        sent = len(fake.requests)
    assert first >= 0.95, first  # the server's retry-after, not the SDK's 0.5 s backoff
    assert out and out[0] >= 0.4, out
    assert sent == 3


def test_a_retry_after_longer_than_the_cap_is_capped() -> None:
    with FakeMessagesAPI([error(429, retry_after="30"), reply(text("ok"))], retry_after_ms=None) as fake:
        engine = AnthropicEngine(
            "claude-haiku-5-5", SecretStr(KEY), base_url=fake.url, max_retries=1, max_retry_wait=0.2
        )
        try:
            t0 = time.monotonic()
            said, _ = engine.complete("eval/answer", "system", "x")
            took = time.monotonic() - t0
        finally:
            engine.close()
    assert said == "ok"
    # the retry and the pause it puts on the other requests wait the cap, not the header's 30 s
    assert 0.15 <= took < 5, took
