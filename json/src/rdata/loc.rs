//! LOC (RFC 1876): the raw fields, and `coordinates` as ZDNS writes them
//! (degrees, minutes, seconds and hemisphere; altitude in metres; size and
//! precisions in metres, printed as Go's `%g` prints them).

use super::Written;
use crate::fields::Fields;

/// Writes a LOC record's fields (version 0; other versions have no defined
/// layout and are left undecoded).
pub fn write(rdata: &[u8], f: &mut Fields, out: &mut Vec<u8>) -> Written {
    if rdata.len() != 16 || rdata[0] != 0 {
        return Written::Nothing;
    }
    let word = |i: usize| u32::from_be_bytes([rdata[i], rdata[i + 1], rdata[i + 2], rdata[i + 3]]);
    let (size, horiz, vert) = (rdata[1], rdata[2], rdata[3]);
    let (lat, lon, alt) = (word(4), word(8), word(12));
    f.num(out, "version", 0);
    f.num(out, "size", u64::from(size));
    f.num(out, "horizontal_pre", u64::from(horiz));
    f.num(out, "vertical_pre", u64::from(vert));
    f.num(out, "latitude", u64::from(lat));
    f.num(out, "longitude", u64::from(lon));
    f.num(out, "altitude", u64::from(alt));
    f.string(
        out,
        "coordinates",
        &coordinates(lat, lon, alt, [size, horiz, vert]),
    );
    Written::Fields
}

/// `52 22 23.000 N 4 53 32.000 E -2.00m 0m 10000m 10m`.
fn coordinates(lat: u32, lon: u32, alt: u32, sizes: [u8; 3]) -> String {
    let altitude = f64::from(alt) / 100.0 - 100_000.0;
    let sizes: Vec<String> = sizes
        .iter()
        .map(|&s| format!("{}m", go_g(metres(s))))
        .collect();
    format!(
        "{} {} {altitude:.2}m {}",
        angle(lat, 'N', 'S'),
        angle(lon, 'E', 'W'),
        sizes.join(" ")
    )
}

/// An angle (thousandths of an arc second, 2^31 at zero) as
/// `D M S.SSS H`.
fn angle(raw: u32, positive: char, negative: char) -> String {
    let mut seconds = (i64::from(raw) - (1i64 << 31)) as f64 / 1000.0;
    let hemisphere = if seconds < 0.0 { negative } else { positive };
    seconds = seconds.abs();
    let whole = seconds as i64;
    let degrees = whole / 3600;
    let minutes = whole % 3600 / 60;
    let rest = seconds - (degrees * 3600 + minutes * 60) as f64;
    format!("{degrees} {minutes} {rest:.3} {hemisphere}")
}

/// A size or precision code (base and power of ten of centimetres) in metres.
fn metres(code: u8) -> f64 {
    f64::from(code >> 4) * 10f64.powi(i32::from(code & 0x0f)) / 100.0
}

/// `value` as Go's `%g` writes it, for the values [`metres`] gives (one
/// significant digit times a power of ten): exponent form from 1e+06 up
/// (and below 1e-4), plain decimals otherwise.
fn go_g(value: f64) -> String {
    if value == 0.0 {
        return "0".to_string();
    }
    let exponent = value.abs().log10().floor() as i32;
    if !(-4..6).contains(&exponent) {
        let mantissa = value / 10f64.powi(exponent);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{}e{sign}{:02}",
            trim_zeros(format!("{mantissa:.6}")),
            exponent.abs()
        );
    }
    trim_zeros(format!("{value:.6}"))
}

fn trim_zeros(text: String) -> String {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_print_as_go_percent_g() {
        // What Go's fmt.Sprintf("%g", v) gives for these values.
        for (code, text) in [
            (0x00, "0"),
            (0x10, "0.01"),
            (0x11, "0.1"),
            (0x12, "1"),
            (0x13, "10"),
            (0x22, "2"),
            (0x16, "10000"),
            (0x17, "100000"),
            (0x18, "1e+06"),
            (0x99, "9e+07"),
            (0x51, "0.5"),
        ] {
            assert_eq!(go_g(metres(code)), text, "code {code:#x}");
        }
    }
}
