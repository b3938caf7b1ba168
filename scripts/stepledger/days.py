"""The day a check's step buckets claim."""
from datetime import datetime, timedelta, timezone


def recent_day():
    """Today (UTC), or yesterday in the first hour after midnight UTC. The burst guard counts a bucket's span only
    up to now (plus 300 s of clock skew) at 9 steps a second, so thousands of steps for today are rightly refused in
    the first minutes of the day (the outage test once was, at 00:03); a check that only needs a recent day uses
    this one."""
    return (datetime.now(timezone.utc) - timedelta(hours=1)).date()
