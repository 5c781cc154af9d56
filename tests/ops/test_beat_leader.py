"""Two beats against one Redis: only the one holding the lease sends (config/beat.py); when it stops, the
other takes over."""

import time

import redis
from celery import Celery

from config.beat import LEADER_KEY, LeaderScheduler


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
