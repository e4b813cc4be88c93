//! Timestamps as users type them: one parser for every flag that takes one.

/// The forms [`parse`] accepts, for usage errors and `--help`.
pub(crate) const FORMS: &str = "milliseconds since the epoch (1764669600000), an RFC 3339 time \
     (2026-12-02T10:00:00Z, 2026-12-02T18:00:00+08:00), or Java's yyyyMMddHHmmss (20261202100000, read as UTC)";

/// A timestamp → milliseconds since the epoch, or `None` when `s` is none of [`FORMS`].
///
/// Fourteen digits are Java's `consumeTimestamp` form (`yyyyMMddHHmmss`): as milliseconds they
/// would be a date after the year 2286, and Java users paste them as they are. Java reads them
/// in the JVM's time zone; rmqcat reads them as UTC (it has no time-zone database), which is
/// what a broker host set to UTC means by them.
pub(crate) fn parse(s: &str) -> Option<i64> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return if s.len() == 14 { java_compact(s) } else { s.parse().ok() };
    }
    rfc3339(s)
}

/// `yyyyMMddHHmmss`, as UTC.
fn java_compact(s: &str) -> Option<i64> {
    let n = |r: std::ops::Range<usize>| s[r].parse::<i64>().ok();
    civil(n(0..4)?, n(4..6)?, n(6..8)?, n(8..10)?, n(10..12)?, n(12..14)?, 0)
}

/// `YYYY-MM-DD(T| )HH:MM[:SS[.fff]][Z|±HH:MM]`; without a zone, UTC.
fn rfc3339(s: &str) -> Option<i64> {
    let (date, time) = s.split_once(['T', 't', ' '])?;
    let (time, offset_min) = zone(time)?;
    let mut d = date.splitn(3, '-').map(digits);
    let (y, mo, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    if frac.is_empty() || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut t = hms.splitn(3, ':').map(digits);
    let (h, mi, sec) = (t.next()??, t.next()??, t.next().unwrap_or(Some(0))?);
    // Milliseconds: the first three digits of the fraction.
    let ms: i64 = format!("{:0<3}", &frac[..frac.len().min(3)]).parse().ok()?;
    Some(civil(y, mo, day, h, mi, sec, ms)? - offset_min * 60_000)
}

/// A field of unsigned decimal digits (`str::parse` would also take a sign).
fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Splits a trailing `Z` or `±HH:MM` off `time`: (the rest, the offset in minutes).
fn zone(time: &str) -> Option<(&str, i64)> {
    if let Some(rest) = time.strip_suffix(['Z', 'z']) {
        return Some((rest, 0));
    }
    match time.rfind(['+', '-']) {
        Some(at) => {
            let (rest, z) = time.split_at(at);
            let sign = if z.starts_with('-') { -1 } else { 1 };
            let (h, m) = z[1..].split_once(':')?;
            if h.len() != 2 || m.len() != 2 {
                return None;
            }
            let (h, m) = (digits(h)?, digits(m)?);
            (h <= 23 && m <= 59).then_some((rest, sign * (h * 60 + m)))
        }
        None => Some((time, 0)),
    }
}

/// A civil UTC date and time → milliseconds since the epoch; `None` when a field is out of range.
fn civil(y: i64, mo: i64, day: i64, h: i64, mi: i64, sec: i64, ms: i64) -> Option<i64> {
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let ranges = [(y, 0, 9999), (mo, 1, 12), (h, 0, 23), (mi, 0, 59), (sec, 0, 60), (ms, 0, 999)];
    if ranges.iter().any(|&(v, lo, hi)| v < lo || v > hi) {
        return None;
    }
    if !(1..=month_days[(mo - 1) as usize]).contains(&day) {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + sec * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_accepted_form() {
        assert_eq!(parse("1700000000000"), Some(1_700_000_000_000));
        assert_eq!(parse("0"), Some(0));
        assert_eq!(parse("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse("2026-12-02T10:00:00Z"), Some(1_796_205_600_000));
        assert_eq!(parse("2026-12-02 10:00:00"), Some(1_796_205_600_000));
        assert_eq!(parse("2026-12-02T18:00:00+08:00"), Some(1_796_205_600_000));
        assert_eq!(parse("2026-12-02T05:30:00-04:30"), Some(1_796_205_600_000));
        assert_eq!(parse("2000-02-29T23:59:59.5"), Some(951_868_799_500));
        assert_eq!(parse("2000-02-29T23:59:59.123456789Z"), Some(951_868_799_123));
        assert_eq!(parse("2026-12-02T10:00Z"), Some(1_796_205_600_000));
        // Java's consumeTimestamp form, which used to be read as milliseconds (a date in 2612).
        assert_eq!(parse("20261202100000"), Some(1_796_205_600_000));
        assert_eq!(parse("20000229235959"), Some(951_868_799_000));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-12-02",
            "12:00",
            "2026-12-02T10:00:00+8",
            "2026-12-02T10:00:00.Z",
            "2026-12-02T24:00:00Z",
            "20261301000000",
            "20260230000000",
            "99999999999999999999999",
            "-5",
            "1e3",
            "2026-12-02T-1:00:00Z",
            "2026-12-02T10:-5:00Z",
            "2026-+1-02T10:00:00Z",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
