//! What a load refuses, and how it names it: a file cut short on a full disk,
//! a file with several bad objects.

use super::tests::{names, tempdir};
use super::*;

/// A Namespace, its name quoted (the byte counts below are of this form).
fn ns(name: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: \"{name}\"\n")
}

/// A cache whose file system has `free` bytes left, whatever the disk says.
fn with_free_space(free: fn(&Path) -> Option<u64>) -> ParseCache {
    ParseCache {
        free_space: FreeSpace(free),
        ..ParseCache::default()
    }
}

/// `a.yaml` loaded with Namespaces a and b, then rewritten with a alone:
/// what the second load serves and says.
fn shrink(cache: &mut ParseCache, tag: &str) -> (Vec<String>, Vec<String>, Vec<String>) {
    let dir = tempdir(&format!("refusal-{tag}"));
    std::fs::write(dir.join("a.yaml"), format!("{}---\n{}", ns("a"), ns("b"))).unwrap();
    std::fs::write(dir.join("other.yaml"), ns("c")).unwrap();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(names(&store), ["a", "b", "c"]);
    assert!(problems.is_empty(), "{problems:?}");
    std::fs::write(dir.join("a.yaml"), ns("a")).unwrap();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    (names(&store), problems, cache.take_notes())
}

#[test]
fn a_file_cut_short_on_a_full_disk_keeps_its_last_good_version() {
    let mut full = with_free_space(|_| Some(FULL_BELOW_BYTES - 1));
    let (served, problems, _) = shrink(&mut full, "full");
    assert_eq!(served, ["a", "b", "c"], "the shorter file is refused");
    assert_eq!(problems.len(), 1, "{problems:?}");
    // Readiness lists the problem lines as they are; the metric's file label
    // is what comes before the first `:`.
    assert!(
        problems[0].starts_with(&format!(
            "a.yaml: shrank from 110 to 53 bytes, losing 1 object(s) (Namespace b) while its \
             file system is full ({} bytes free)",
            FULL_BELOW_BYTES - 1
        )),
        "{problems:?}"
    );

    // With room (or when the room cannot be told), it is a shrink that was
    // meant: served, and logged.
    for (tag, probe) in [
        (
            "room",
            (|_| Some(FULL_BELOW_BYTES)) as fn(&Path) -> Option<u64>,
        ),
        ("unknown", |_| None),
    ] {
        let (served, problems, notes) = shrink(&mut with_free_space(probe), tag);
        assert_eq!(served, ["a", "c"], "{tag}");
        assert!(problems.is_empty(), "{tag}: {problems:?}");
        assert_eq!(notes.len(), 1, "{tag}: {notes:?}");
        assert!(
            notes[0].starts_with("a.yaml: shrank from 110 to 53 bytes"),
            "{notes:?}"
        );
    }
}

#[test]
fn a_file_cut_short_is_served_once_the_disk_has_room_again() {
    let dir = tempdir("room-again");
    let mut cache = with_free_space(|_| Some(0));
    std::fs::write(dir.join("a.yaml"), format!("{}---\n{}", ns("a"), ns("b"))).unwrap();
    cache.load(&dir).unwrap();
    std::fs::write(dir.join("a.yaml"), ns("a")).unwrap();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(
        (names(&store), problems.len()),
        (vec!["a".into(), "b".into()], 1)
    );
    cache.free_space = FreeSpace(|_| Some(1 << 30));
    // Same stamp: the refused version is looked at again, not skipped.
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(names(&store), ["a"], "{problems:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn every_bad_object_of_a_file_is_a_problem_and_other_files_serve() {
    let dir = tempdir("bad-names");
    std::fs::write(dir.join("good.yaml"), ns("app")).unwrap();
    let bad = [ns("a_b"), ns("fine"), ns("C D")].join("---\n");
    std::fs::write(dir.join("bad.yaml"), bad).unwrap();
    let (store, problems) = ParseCache::default()
        .load_each(&dir, &Edits::default())
        .unwrap();
    assert_eq!(
        names(&store),
        ["app"],
        "a bad file adds nothing; the others load"
    );
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("bad.yaml:4: Namespace a_b: `metadata.name` is not a valid name"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("bad.yaml:14: Namespace C D: `metadata.name` is not a valid name"),
        "{problems:#?}"
    );
    // The one-shot commands' strict load says both too.
    let err = load_dir(&dir).unwrap_err();
    assert_eq!(err.problems, problems);
    let _ = std::fs::remove_dir_all(&dir);
}
