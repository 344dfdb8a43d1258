//! Timestamps: nanoseconds since the Unix epoch, printed as RFC 3339 UTC.

use std::cell::Cell;

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar.
/// The era-based method: 400-year eras of 146097 days, March-based years so the
/// leap day falls at the end.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Appends `ts_ns` as `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` to `out` (i64
/// nanoseconds span the years 1677 to 2262: always four digits). The
/// digits are written over a template appended with one copy of known
/// length, the date and time of day taken from the last call's when the
/// second is the same (consecutive packets mostly share theirs): one line
/// of JSON each, digit by digit with a capacity check each, it cost a
/// twentieth of a JSON run.
pub fn write_rfc3339_ns(ts_ns: i64, out: &mut Vec<u8>) {
    let secs = ts_ns.div_euclid(1_000_000_000);
    let nanos = ts_ns.rem_euclid(1_000_000_000) as u32;
    // Written in place, over a template.
    let start = out.len();
    out.extend_from_slice(b"0000-00-00T00:00:00.000000000Z");
    let text = &mut out[start..];
    let (last, date_time) = LAST_SECOND.get();
    if last == secs {
        text[..19].copy_from_slice(&date_time);
    } else {
        let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
        let of_day = secs.rem_euclid(86_400) as u32;
        put_digits(&mut text[..4], year.clamp(0, 9999) as u32);
        put_digits(&mut text[5..7], month);
        put_digits(&mut text[8..10], day);
        put_digits(&mut text[11..13], of_day / 3600);
        put_digits(&mut text[14..16], of_day / 60 % 60);
        put_digits(&mut text[17..19], of_day % 60);
        let mut date_time = [0; 19];
        date_time.copy_from_slice(&text[..19]);
        LAST_SECOND.set((secs, date_time));
    }
    put_digits(&mut text[20..29], nanos);
}

thread_local! {
    /// The second [`write_rfc3339_ns`] wrote last on this thread, and its
    /// text up to the seconds (no second is `i64::MIN`: none yet).
    static LAST_SECOND: Cell<(i64, [u8; 19])> = const { Cell::new((i64::MIN, [0; 19])) };
}

/// Writes `value` into `to` as decimal digits, zero-padded to its length.
#[inline]
fn put_digits(to: &mut [u8], value: u32) {
    let mut v = value;
    for slot in to.iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fmt(ts: i64) -> String {
        let mut v = Vec::new();
        write_rfc3339_ns(ts, &mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn formats_known_instants() {
        // `date -u -d @0` and `date -u -d @1704067200` (GNU date).
        assert_eq!(fmt(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(
            fmt(1_704_067_200_123_456_000),
            "2024-01-01T00:00:00.123456000Z"
        );
        // 2024-02-29 12:34:56 UTC = 1709210096 (`date -u -d '2024-02-29 12:34:56' +%s`).
        assert_eq!(
            fmt(1_709_210_096_000_000_001),
            "2024-02-29T12:34:56.000000001Z"
        );
        // Before the epoch: 1969-12-31T23:59:59.5
        assert_eq!(fmt(-500_000_000), "1969-12-31T23:59:59.500000000Z");
        // 2100-03-01 (2100 is not a leap year) = 4107542400.
        assert_eq!(
            fmt(4_107_542_400_000_000_000),
            "2100-03-01T00:00:00.000000000Z"
        );
        // The ends of i64 nanoseconds (`date -u -d @9223372036` and
        // `date -u -d @-9223372037`).
        assert_eq!(fmt(i64::MAX), "2262-04-11T23:47:16.854775807Z");
        assert_eq!(fmt(i64::MIN), "1677-09-21T00:12:43.145224192Z");
        // The same second again, and the next (the date and time of day of
        // the last call are reused only for the same second).
        assert_eq!(fmt(-1), "1969-12-31T23:59:59.999999999Z");
        assert_eq!(fmt(-2), "1969-12-31T23:59:59.999999998Z");
        assert_eq!(fmt(0), "1970-01-01T00:00:00.000000000Z");
        assert_eq!(fmt(999_999_999), "1970-01-01T00:00:00.999999999Z");
        assert_eq!(fmt(86_400_000_000_000), "1970-01-02T00:00:00.000000000Z");
        assert_eq!(fmt(86_399_999_999_999), "1970-01-01T23:59:59.999999999Z");
    }

    /// Timestamps back and forth around second boundaries, written one after
    /// the other, read as those written with nothing remembered.
    #[test]
    fn the_remembered_second_is_used_for_that_second_only() {
        let mut ts: i64 = 1_704_067_199_000_000_000;
        for step in 0..2000i64 {
            ts += (step % 7 - 3) * 400_000_000 + step;
            let written = fmt(ts);
            LAST_SECOND.set((i64::MIN, [0; 19]));
            assert_eq!(written, fmt(ts), "{ts}");
        }
    }
}
