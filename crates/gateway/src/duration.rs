//! The Gateway API Duration format (GEP-2257): one to four `<number><unit>`
//! parts, each number of one to five digits, units `h`, `m`, `s` and `ms`
//! (`1h30m`, `500ms`, `0s`). No sign, no fractions, no spaces.

/// The duration in milliseconds, or why the value is not a Duration.
pub fn parse_ms(value: &str) -> Result<u64, String> {
    let invalid = |why: &str| format!("{value:?} is not a Gateway API duration: {why}");
    let mut rest = value;
    let mut parts = 0;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(invalid("a number must come before each unit"));
        }
        if digits > 5 {
            return Err(invalid("at most five digits per part"));
        }
        let (number, tail) = rest.split_at(digits);
        let number: u64 = number.parse().map_err(|_| invalid("bad number"))?;
        let (unit_ms, unit_len) = if tail.starts_with("ms") {
            (1, 2)
        } else if tail.starts_with('h') {
            (3_600_000, 1)
        } else if tail.starts_with('m') {
            (60_000, 1)
        } else if tail.starts_with('s') {
            (1_000, 1)
        } else {
            return Err(invalid("units are h, m, s and ms"));
        };
        parts += 1;
        if parts > 4 {
            return Err(invalid("at most four parts"));
        }
        total += number * unit_ms;
        rest = &tail[unit_len..];
    }
    if parts == 0 {
        return Err(invalid("empty"));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::parse_ms;

    #[test]
    fn durations_of_the_spec_parse() {
        for (text, ms) in [
            ("0s", 0),
            ("500ms", 500),
            ("1s", 1_000),
            ("1h30m", 5_400_000),
            ("1h2m3s4ms", 3_723_004),
            ("99999ms", 99_999),
            ("2m0s", 120_000),
        ] {
            assert_eq!(parse_ms(text), Ok(ms), "{text}");
        }
    }

    #[test]
    fn anything_else_is_refused_with_the_value_named() {
        for text in [
            "",
            "1",
            "s",
            "1.5s",
            "-1s",
            "1 s",
            "1d",
            "100000ms",
            "1h1m1s1ms1h",
            "1sx",
            "1S",
            "+1s",
            "1µs",
        ] {
            let err = parse_ms(text).expect_err(text);
            assert!(err.contains(&format!("{text:?}")), "{err}");
        }
    }
}
