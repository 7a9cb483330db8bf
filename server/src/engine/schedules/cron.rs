//! A schedule's timetable: its cron expression read in its time zone. Pure time arithmetic on
//! milliseconds since the epoch (croner does the calendar and daylight-saving work), so every
//! decision about fire times is tested here without a database or a clock.

use std::str::FromStr;

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;
use croner::{parser::CronParser, Cron};
use waymark_store::Millis;

use crate::engine::{EngineError, EngineResult, ErrorCode};

/// The time zone of a schedule that names none.
pub const DEFAULT_TIMEZONE: &str = "UTC";

#[derive(Debug, Clone)]
pub struct Timetable {
    cron: Cron,
    tz: Tz,
}

/// Too many fire times in a range (more than the limit asked for).
#[derive(Debug, PartialEq, Eq)]
pub struct TooMany;

fn invalid_cron(expr: &str, why: impl std::fmt::Display) -> EngineError {
    EngineError::new(
        ErrorCode::InvalidArgument,
        "INVALID_CRON",
        format!("cron expression {expr:?} is not valid: {why}; use 5 fields (minute hour day month weekday) or 6 with seconds first"),
    )
}

impl Timetable {
    /// Reads `expr` (5 fields with seconds 0, or 6 with seconds first) in `timezone` (an IANA
    /// name; empty is UTC). `INVALID_CRON` / `INVALID_TIMEZONE` say what is wrong.
    pub fn parse(expr: &str, timezone: &str) -> EngineResult<Timetable> {
        let zone = if timezone.is_empty() {
            DEFAULT_TIMEZONE
        } else {
            timezone
        };
        let tz = Tz::from_str(zone).map_err(|_| {
            EngineError::new(
                ErrorCode::InvalidArgument,
                "INVALID_TIMEZONE",
                format!("time zone {zone:?} is not an IANA time zone name (like \"UTC\" or \"Europe/Berlin\")"),
            )
        })?;
        // croner's default parser takes seconds as optional: 5 fields run at second 0.
        let cron = CronParser::new().parse(expr).map_err(|e| invalid_cron(expr, e))?;
        Ok(Timetable { cron, tz })
    }

    fn at(&self, ms: Millis) -> Option<DateTime<Tz>> {
        Utc.timestamp_millis_opt(ms).single().map(|t| t.with_timezone(&self.tz))
    }

    /// The first fire time strictly after `t`; `None` when there is none (a pattern whose
    /// years have passed).
    pub fn next_after(&self, t: Millis) -> Option<Millis> {
        let next = self.cron.find_next_occurrence(&self.at(t)?, false).ok()?;
        Some(next.timestamp_millis())
    }

    /// The latest fire time at or before `t`.
    pub fn latest_at_or_before(&self, t: Millis) -> Option<Millis> {
        // Fire times are whole seconds: from the second `t` is in, inclusive.
        let whole = self.at(t.div_euclid(1000) * 1000)?;
        let prev = self.cron.find_previous_occurrence(&whole, true).ok()?;
        Some(prev.timestamp_millis())
    }

    /// Every fire time from `from` through `to` (both included), earliest first; `TooMany`
    /// past `max` of them.
    pub fn between(&self, from: Millis, to: Millis, max: usize) -> Result<Vec<Millis>, TooMany> {
        let mut times = Vec::new();
        let mut cursor = from - 1;
        while let Some(t) = self.next_after(cursor).filter(|&t| t <= to) {
            if times.len() == max {
                return Err(TooMany);
            }
            times.push(t);
            cursor = t;
        }
        Ok(times)
    }
}

/// The time as the ids and the CLI show it: RFC 3339, UTC, whole seconds when it is one.
pub fn rfc3339(ms: Millis) -> String {
    let t = Utc.timestamp_millis_opt(ms).single().unwrap_or_default();
    let format = if ms % 1000 == 0 {
        SecondsFormat::Secs
    } else {
        SecondsFormat::Millis
    };
    t.to_rfc3339_opts(format, true)
}

/// The id of the workflow a schedule starts for a fire time: the same on every replica, so a
/// fire time has one workflow however often or wherever it is fired or backfilled.
pub fn fire_workflow_id(schedule: &str, fire_at: Millis) -> String {
    format!("schedule:{schedule}:{}", rfc3339(fire_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds of an RFC 3339 time.
    fn ms(s: &str) -> Millis {
        DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis()
    }

    #[test]
    fn five_fields_fire_at_second_zero_and_six_fields_take_seconds() {
        let every_minute = Timetable::parse("* * * * *", "").unwrap();
        assert_eq!(
            every_minute.next_after(ms("2026-01-01T10:00:30.250Z")),
            Some(ms("2026-01-01T10:01:00Z"))
        );
        let every_15s = Timetable::parse("*/15 * * * * *", "UTC").unwrap();
        assert_eq!(
            every_15s.next_after(ms("2026-01-01T10:00:30Z")),
            Some(ms("2026-01-01T10:00:45Z")),
            "strictly after"
        );
        assert_eq!(
            every_15s.next_after(ms("2026-01-01T10:00:30.001Z")),
            Some(ms("2026-01-01T10:00:45Z"))
        );
    }

    #[test]
    fn the_latest_due_time_is_at_or_before_now() {
        let every_second = Timetable::parse("* * * * * *", "UTC").unwrap();
        let now = ms("2026-01-01T10:00:07.400Z");
        assert_eq!(every_second.latest_at_or_before(now), Some(ms("2026-01-01T10:00:07Z")));
        assert_eq!(
            every_second.latest_at_or_before(ms("2026-01-01T10:00:07Z")),
            Some(ms("2026-01-01T10:00:07Z")),
            "inclusive"
        );
        let hourly = Timetable::parse("0 * * * *", "UTC").unwrap();
        assert_eq!(hourly.latest_at_or_before(now), Some(ms("2026-01-01T10:00:00Z")));
    }

    #[test]
    fn time_zones_move_the_wall_clock() {
        let nine = Timetable::parse("0 9 * * *", "Asia/Tokyo").unwrap();
        // 09:00 in Tokyo (UTC+9, no DST) is midnight UTC.
        assert_eq!(
            nine.next_after(ms("2026-06-01T12:00:00Z")),
            Some(ms("2026-06-02T00:00:00Z"))
        );
    }

    #[test]
    fn daylight_saving_changes_follow_the_wall_clock() {
        // New York springs forward on 2026-03-08 (02:00 EST -> 03:00 EDT) and falls back on
        // 2026-11-01 (02:00 EDT -> 01:00 EST).
        let daily = Timetable::parse("30 9 * * *", "America/New_York").unwrap();
        assert_eq!(
            daily.next_after(ms("2026-03-07T15:00:00Z")),
            Some(ms("2026-03-08T13:30:00Z")),
            "09:30 EDT after the change (13:30 UTC)"
        );
        assert_eq!(
            daily.next_after(ms("2026-03-06T15:00:00Z")),
            Some(ms("2026-03-07T14:30:00Z")),
            "09:30 EST before it (14:30 UTC)"
        );
        // 02:30 does not exist on 2026-03-08: a fixed time in the gap runs right after it.
        let in_gap = Timetable::parse("30 2 * * *", "America/New_York").unwrap();
        let t = in_gap.next_after(ms("2026-03-08T05:00:00Z")).unwrap();
        assert_eq!(t, ms("2026-03-08T07:00:00Z"), "03:00 EDT, the first time after the gap");
        // 01:30 happens twice on 2026-11-01: a fixed time fires once, at the first.
        let twice = Timetable::parse("30 1 * * *", "America/New_York").unwrap();
        let first = twice.next_after(ms("2026-11-01T04:00:00Z")).unwrap();
        assert_eq!(first, ms("2026-11-01T05:30:00Z"), "01:30 EDT");
        assert_eq!(
            twice.next_after(first),
            Some(ms("2026-11-02T06:30:00Z")),
            "not again at 01:30 EST; next day"
        );
    }

    #[test]
    fn ranges_list_every_fire_time_and_stop_at_the_limit() {
        let every_10s = Timetable::parse("*/10 * * * * *", "UTC").unwrap();
        let from = ms("2026-01-01T10:00:00Z");
        let to = ms("2026-01-01T10:00:30Z");
        assert_eq!(
            every_10s.between(from, to, 100).unwrap(),
            [from, from + 10_000, from + 20_000, to],
            "both ends included"
        );
        assert_eq!(every_10s.between(from, to, 3), Err(TooMany));
        assert!(every_10s.between(to + 1, to + 2, 3).unwrap().is_empty());
    }

    #[test]
    fn bad_expressions_and_zones_are_refused_with_their_reason() {
        assert_eq!(
            Timetable::parse("61 * * * *", "UTC").unwrap_err().reason,
            "INVALID_CRON"
        );
        assert_eq!(Timetable::parse("not cron", "UTC").unwrap_err().reason, "INVALID_CRON");
        assert_eq!(Timetable::parse("", "UTC").unwrap_err().reason, "INVALID_CRON");
        let tz = Timetable::parse("* * * * *", "Mars/Olympus").unwrap_err();
        assert_eq!((tz.code, tz.reason), (ErrorCode::InvalidArgument, "INVALID_TIMEZONE"));
        assert!(tz.message.contains("Mars/Olympus"));
    }

    #[test]
    fn fire_ids_name_the_schedule_and_the_utc_second() {
        assert_eq!(
            fire_workflow_id("nightly", ms("2026-03-08T07:00:00Z")),
            "schedule:nightly:2026-03-08T07:00:00Z"
        );
        assert_eq!(rfc3339(ms("2026-03-08T07:00:00.250Z")), "2026-03-08T07:00:00.250Z");
    }
}
