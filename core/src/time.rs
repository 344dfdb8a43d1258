//! Timestamps: nanoseconds since the Unix epoch, printed as RFC 3339 UTC.

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

/// Appends `ts_ns` as `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` to `out`.
pub fn write_rfc3339_ns(ts_ns: i64, out: &mut Vec<u8>) {
    let secs = ts_ns.div_euclid(1_000_000_000);
    let nanos = ts_ns.rem_euclid(1_000_000_000) as u32;
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let of_day = secs.rem_euclid(86_400) as u32;
    if (0..=9999).contains(&year) {
        push_digits(out, year as u32, 4);
    } else {
        out.extend_from_slice(year.to_string().as_bytes());
    }
    out.push(b'-');
    push_digits(out, month, 2);
    out.push(b'-');
    push_digits(out, day, 2);
    out.push(b'T');
    push_digits(out, of_day / 3600, 2);
    out.push(b':');
    push_digits(out, of_day / 60 % 60, 2);
    out.push(b':');
    push_digits(out, of_day % 60, 2);
    out.push(b'.');
    push_digits(out, nanos, 9);
    out.push(b'Z');
}

/// Appends `value` as exactly `width` decimal digits (zero-padded).
fn push_digits(out: &mut Vec<u8>, value: u32, width: usize) {
    let mut buf = [b'0'; 10];
    let mut v = value;
    for slot in buf[..width].iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out.extend_from_slice(&buf[..width]);
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
    }
}
