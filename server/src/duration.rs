//! Durations as operators write them, on the command line, in the config file and in the
//! environment: the one parser every flag and setting shares.

use std::time::Duration;

/// Parses a duration: "250ms", "15s", "2m", "1h30m", "30d" (humantime's forms), a bare number
/// of seconds, or a decimal one with a unit ("1.5s").
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.chars().next().is_some_and(|c| c.is_ascii_digit())
        && !s.contains('.')
        && s.ends_with(|c: char| c.is_alphabetic())
    {
        let d = humantime::parse_duration(s)
            .map_err(|e| format!("{s:?} is not a duration like 250ms, 15s, 1h30m or 30d: {e}"))?;
        if d > Duration::from_secs(10 * 365 * 86400) {
            return Err(format!("{s:?} is out of range"));
        }
        return Ok(d);
    }
    let split = s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 250ms, 15s, 2m, 1h or 30d"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?}; use ms, s, m, h or d")),
    };
    if !secs.is_finite() || !(0.0..=10.0 * 365.0 * 86400.0).contains(&secs) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("15s").unwrap(), Duration::from_secs(15));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("-1s").is_err());
        assert_eq!(parse_duration("30d").unwrap(), Duration::from_secs(30 * 86400));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert!(parse_duration("11years").is_err());
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }
}
