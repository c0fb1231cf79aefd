"""When scheduled jobs fire: `SchedulePlan` (daily at HH:MM in a time zone, a weekly full run
instead on one day, a misfire grace) and the cron triggers, next and previous fire times
it gives (basecrawler.operations.scheduler runs them)."""
from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass

from basecrawler.config import env_value
from basecrawler.errors import ConfigError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAILY_JOB, WEEKLY_FULL_JOB = "daily-incremental", "weekly-full"


@dataclass(frozen=True)
class SchedulePlan:
    """When jobs fire: daily `at` (HH:MM) in `tz`, a full run instead on `full_day`."""

    at: str = "06:00"
    tz: str = "UTC"
    full_day: str | None = "sun"        # None: no weekly full run
    misfire_grace_s: int = 12 * 3600

    def __post_init__(self):
        hour_minute = self.at.split(":")
        if len(hour_minute) != 2 or not all(p.isdigit() for p in hour_minute) \
                or not (0 <= int(hour_minute[0]) < 24 and 0 <= int(hour_minute[1]) < 60):
            raise ConfigError(f"schedule time must be HH:MM (24 h), not {self.at!r}")
        try:
            zoneinfo.ZoneInfo(self.tz)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"unknown time zone {self.tz!r} (use an IANA name such as Asia/Seoul)") from None
        if self.full_day is not None and self.full_day not in DAYS:
            raise ConfigError(f"full-run day must be one of {', '.join(DAYS)}, not {self.full_day!r}")
        if self.misfire_grace_s <= 0:
            raise ConfigError("misfire grace must be positive")

    @property
    def hour(self) -> int:
        return int(self.at.split(":")[0])

    @property
    def minute(self) -> int:
        return int(self.at.split(":")[1])

    @classmethod
    def from_env(cls, **overrides) -> "SchedulePlan":
        """Defaults → BASECRAWLER_SCHEDULE_AT / _TZ / _FULL_DAY / _GRACE_HOURS → overrides."""
        values: dict = {"tz": _local_zone_name()}
        for attr, name in (("at", "BASECRAWLER_SCHEDULE_AT"), ("tz", "BASECRAWLER_SCHEDULE_TZ"),
                           ("full_day", "BASECRAWLER_SCHEDULE_FULL_DAY")):
            if env_value(name) is not None:
                values[attr] = env_value(name)
        if env_value("BASECRAWLER_SCHEDULE_GRACE_HOURS") is not None:
            values["misfire_grace_s"] = int(float(env_value("BASECRAWLER_SCHEDULE_GRACE_HOURS")) * 3600)
        values.update({k: v for k, v in overrides.items() if v is not None})
        if isinstance(values.get("full_day"), str):
            values["full_day"] = None if values["full_day"].lower() in ("none", "off", "never") \
                else values["full_day"].lower()[:3]
        return cls(**values)

    def triggers(self) -> dict:
        """Job id → (mode, CronTrigger). On the full day the full run replaces the incremental
        one, so the two never fire together."""
        from apscheduler.triggers.cron import CronTrigger

        tz = zoneinfo.ZoneInfo(self.tz)
        daily_days = ",".join(d for d in DAYS if d != self.full_day)
        plan = {DAILY_JOB: ("incremental", CronTrigger(day_of_week=daily_days, hour=self.hour, minute=self.minute,
                                                        timezone=tz))}
        if self.full_day:
            plan[WEEKLY_FULL_JOB] = ("full", CronTrigger(day_of_week=self.full_day, hour=self.hour,
                                                         minute=self.minute, timezone=tz))
        return plan

    def upcoming(self, count: int = 8, now: dt.datetime | None = None) -> list[tuple[dt.datetime, str, str]]:
        """The next `count` fire times as (time, job id, mode), soonest first."""
        now = now or dt.datetime.now(zoneinfo.ZoneInfo(self.tz))
        found = []
        for job_id, (mode, trigger) in self.triggers().items():
            previous, moment = None, now
            for _ in range(count):
                fire = trigger.get_next_fire_time(previous, moment)
                if fire is None:
                    break
                found.append((fire, job_id, mode))
                previous, moment = fire, fire + dt.timedelta(seconds=1)
        return sorted(found)[:count]

    def previous_fire_times(self, now: dt.datetime) -> dict[str, tuple[str, dt.datetime]]:
        """Job id → (mode, latest fire time at or before `now`)."""
        found = {}
        for job_id, (mode, trigger) in self.triggers().items():
            latest, fire = None, trigger.get_next_fire_time(None, now - dt.timedelta(days=8))
            while fire is not None and fire <= now:
                latest, fire = fire, trigger.get_next_fire_time(fire, fire + dt.timedelta(seconds=1))
            if latest is not None:
                found[job_id] = (mode, latest)
        return found


def _local_zone_name() -> str:
    try:
        import tzlocal  # an APScheduler 3 dependency

        name = str(tzlocal.get_localzone())
        zoneinfo.ZoneInfo(name)
        return name
    except Exception:  # no usable local zone (containers): UTC is a safe, explicit default
        return "UTC"
