"""Two beats against one Redis: only the one holding the lease sends (config/beat.py); when it stops, the
other takes over."""

import time

import redis
from celery import Celery

from config.beat import LEADER_KEY, SENT_KEY, LeaderScheduler


class RecordingScheduler(LeaderScheduler):
    """Records what it would send instead of sending it (the broker is not what is tested here)."""

    def __init__(self, *args, sent, **kwargs):
        self.sent = sent
        super().__init__(*args, **kwargs)

    def apply_async(self, entry, producer=None, advance=True, **kwargs):
        self.sent.append((self.token, entry.name))


def _beat(url, tmp_path, name, sent):
    app = Celery("beat-test", broker=url)
    app.conf.beat_schedule = {"often": {"task": "beat-test.often", "schedule": 0.05}}
    return RecordingScheduler(app=app, schedule_filename=str(tmp_path / name), sent=sent, lazy=False)


def _run(beats, seconds):
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        for beat in beats:
            beat.tick()
        time.sleep(0.01)


def test_a_second_beat_sends_nothing_until_the_first_stops(redis_url, tmp_path):
    redis.Redis.from_url(redis_url).delete(LEADER_KEY)
    sent = []
    first = _beat(redis_url, tmp_path, "first", sent)
    first.tick()
    second = _beat(redis_url, tmp_path, "second", sent)
    try:
        _run([first, second], 0.6)
        senders = {token for token, _ in sent}
        assert senders == {first.token}
        assert len(sent) >= 5
        assert (first.leading, second.leading) == (True, False)

        first.close()
        sent.clear()
        _run([second], 0.3)
        assert {token for token, _ in sent} == {second.token}
    finally:
        second.close()
    assert not redis.Redis.from_url(redis_url).exists(LEADER_KEY)


class AlwaysLeading(RecordingScheduler):
    """Two beats that both believe they lead (a lease lost and taken over mid-interval)."""

    def lead(self) -> bool:
        self.leading = True
        return True


def test_even_two_leaders_never_send_a_task_twice_within_its_interval(redis_url, tmp_path):
    client = redis.Redis.from_url(redis_url)
    client.delete(LEADER_KEY, *client.keys(f"{SENT_KEY}:*"))
    sent = []
    beats = []
    for name in ("one", "two"):
        app = Celery("beat-test", broker=redis_url)
        app.conf.beat_schedule = {"often": {"task": "beat-test.often", "schedule": 0.2}}
        beats.append(AlwaysLeading(app=app, schedule_filename=str(tmp_path / name), sent=sent, lazy=False))
    # Each send happened during its tick: after the tick began and before it returned. The longest two sends
    # can be apart is from the first's tick beginning to the second's returning, which a slow tick (a busy
    # machine) only lengthens; two sends within one interval still show as a short span.
    ticks = []
    ends = time.monotonic() + 1.5
    while time.monotonic() < ends:
        for beat in beats:
            before, began = len(sent), time.monotonic()
            beat.tick()
            ticks += [(began, time.monotonic())] * (len(sent) - before)
        time.sleep(0.005)
    for beat in beats:
        beat.close()
    spans = [second[1] - first[0] for first, second in zip(ticks, ticks[1:], strict=False)]
    assert len(ticks) >= 4
    assert min(spans) >= 0.2 * 0.9 - 0.01, spans  # never twice within nine tenths of the interval
    assert {token for token, _ in sent} <= {beat.token for beat in beats}
