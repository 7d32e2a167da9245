use super::*;

fn refused(pattern: &str) -> Re2Error {
    check(pattern).expect_err(pattern)
}

#[test]
fn everyday_patterns_pass() {
    for p in [
        "/v[0-9]+/users/[^/]+",
        "^/api/(?P<version>v1|v2)/.*$",
        "(?<name>x)",
        "(?i)^bearer [a-z0-9._~+/-]+=*$",
        "(?m)^a$",
        "(?s:.)",
        "(?U)a+",
        "(?i-s:a.)",
        "\\d{3}-\\d{4}",
        "[[:alpha:]][[:^digit:]]\\w\\s\\S\\W\\D",
        "\\Aab\\z\\bc\\B",
        "[\\d\\-_.]",
        "a{0,900}",
        "(?:a{10}){90}",
        "\\x41\\x{7e}\\0\\012\\t\\n\\r\\f\\v\\a",
        "\\_\\ \\%x",
        "café",
        "(?:é)+",
        // A UUID: Envoy's default limit of 100 refuses it, ours does not.
        "^/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$",
    ] {
        assert_eq!(check(p), Ok(()), "{p}");
    }
}

#[test]
fn what_does_not_parse_is_refused_with_regex_syntax_words() {
    assert_eq!(refused("/bad/("), Re2Error::Syntax("unclosed group".into()));
    assert!(matches!(refused("[z-a]"), Re2Error::Syntax(_)));
    assert!(matches!(refused("a(?=b)"), Re2Error::Syntax(_)));
    assert!(matches!(refused("\\Z"), Re2Error::Syntax(_)));
    assert_eq!(refused(""), Re2Error::Empty);
}

#[test]
fn word_boundary_forms_rust_has_and_re2_does_not() {
    for p in [
        "\\b{start}x",
        "x\\b{end}",
        "\\b{start-half}",
        "\\b{end-half}",
        "\\<x",
        "x\\>",
    ] {
        assert!(matches!(refused(p), Re2Error::WordBoundary(_)), "{p}");
    }
    assert_eq!(
        refused("a\\b{start}"),
        Re2Error::WordBoundary("\\b{start}".into())
    );
}

#[test]
fn class_set_operations_and_nested_classes() {
    assert_eq!(refused("[a&&b]"), Re2Error::SetOperation("a&&b".into()));
    assert!(matches!(refused("[a-z--m]"), Re2Error::SetOperation(_)));
    assert!(matches!(refused("[a-z~~m]"), Re2Error::SetOperation(_)));
    assert_eq!(refused("[a[bc]]"), Re2Error::NestedClass("[bc]".into()));
}

#[test]
fn only_the_flags_re2_has() {
    assert_eq!(refused("(?x)a"), Re2Error::Flag('x'));
    assert_eq!(refused("(?u:a)"), Re2Error::Flag('u'));
    assert_eq!(refused("(?-u)a"), Re2Error::Flag('u'));
    assert_eq!(refused("(?R)a"), Re2Error::Flag('R'));
}

#[test]
fn group_names_are_ascii_words() {
    assert_eq!(refused("(?P<a.b>x)"), Re2Error::GroupName("a.b".into()));
    assert_eq!(refused("(?<a[0]>x)"), Re2Error::GroupName("a[0]".into()));
    assert!(matches!(refused("(?P<日本>x)"), Re2Error::GroupName(_)));
}

#[test]
fn escapes_re2_refuses_or_reads_as_a_byte() {
    assert_eq!(
        refused("\\u0041"),
        Re2Error::UnicodeEscape("\\u0041".into())
    );
    for p in ["\\U00000041", "\\u{41}"] {
        assert!(matches!(refused(p), Re2Error::UnicodeEscape(_)), "{p}");
    }
    assert_eq!(refused("(a)\\1"), Re2Error::Backreference("\\1".into()));
    assert_eq!(
        refused("\\x{100}"),
        Re2Error::EscapePastAscii("\\x{100}".into())
    );
    for p in ["\\xE9", "\\351"] {
        assert!(matches!(refused(p), Re2Error::EscapePastAscii(_)), "{p}");
    }
}

#[test]
fn unicode_and_non_ascii_that_latin1_reads_as_bytes() {
    for p in ["\\pL", "\\p{Greek}", "\\P{Han}", "[\\p{L}a]"] {
        assert!(matches!(refused(p), Re2Error::UnicodeClass(_)), "{p}");
    }
    assert_eq!(refused("[éa]"), Re2Error::NonAscii('é', "in a class"));
    assert_eq!(refused("é+"), Re2Error::NonAscii('é', "under a repetition"));
    assert_eq!(
        refused("(?i)café"),
        Re2Error::NonAscii('é', "in a case-insensitive pattern")
    );
}

#[test]
fn stacked_repetitions() {
    for p in ["a**", "a*{2}", "a{2}{3}", "a+?+", "(?:a)*{2}"] {
        assert_eq!(refused(p), Re2Error::StackedRepetition(p.into()), "{p}");
    }
    assert_eq!(check("(?:a*)*"), Ok(()));
}

#[test]
fn repetition_limits() {
    assert_eq!(
        refused("[a-z]{3000}"),
        Re2Error::RepetitionCount("{3000}".into())
    );
    for p in ["a{1001}", "a{1001,}", "a{2,1001}"] {
        assert!(matches!(refused(p), Re2Error::RepetitionCount(_)), "{p}");
    }
    assert_eq!(
        refused("(?:a{100}){11}"),
        Re2Error::NestedRepetition("a{100}".into(), 1100)
    );
    assert_eq!(
        refused("(?:(?:a{10}){10}){11}"),
        Re2Error::NestedRepetition("a{10}".into(), 1100)
    );
    // Zero-count and uncounted repetitions do not multiply.
    assert_eq!(check("(?:(?:a{0}){1000})*"), Ok(()));
}

/// Boundaries seen with Envoy 1.40 (`envoy --mode validate`, error level 1000):
/// the bound refuses only what Envoy refuses.
#[test]
fn program_size_lower_bound() {
    // Envoy: 1000 instructions, accepted.
    assert_eq!(check("[a-z]{996}"), Ok(()));
    // Envoy: `^` and a literal prefix leave the program; accepted.
    assert_eq!(check("^a{997}"), Ok(()));
    assert_eq!(check("^aaaa[a-z]{996}"), Ok(()));
    // Envoy: 1004 and 1003.
    assert_eq!(refused("[a-z]{1000}"), Re2Error::ProgramSize(1002));
    assert_eq!(refused("a{999}"), Re2Error::ProgramSize(1001));
    // Envoy: 1501 (a capture costs two).
    assert_eq!(refused("(a){499}"), Re2Error::ProgramSize(1499));
    // Envoy: 1024; the nested counts (1000) are within RE2's limit.
    assert_eq!(refused("(?:a{100}){10}"), Re2Error::ProgramSize(1002));
    // The largest alternative counts, not their sum (RE2 factors them).
    assert_eq!(check("(?:ab|ac){499}"), Ok(()));
    assert_eq!(check("(?:[a-z]{500}|[a-z]{400})[a-z]{400}"), Ok(()));
    // Envoy: accepted, the class is empty and RE2 drops the sequence.
    assert_eq!(check("[^\\d\\D](x){500}b"), Ok(()));
}

#[test]
fn messages_name_the_construct() {
    assert_eq!(
        refused("\\<").to_string(),
        "\"\\\\<\" is not an RE2 assertion (RE2 reads it as literal text)"
    );
    assert_eq!(
        refused("[a-z]{3000}").to_string(),
        "\"{3000}\": RE2 allows at most 1000 repetitions"
    );
    assert_eq!(
        refused("[a\n&&b]").to_string(),
        "\"a\\n&&b\": RE2 has no class set operations (it reads &&, -- and ~~ literally)"
    );
}
