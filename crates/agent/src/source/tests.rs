//! The directory source, file by file and edit by edit.

use super::*;

pub(super) fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("aether-edge-source-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_broken_file_is_named_with_its_line() {
    let dir = tempdir("broken");
    std::fs::write(
        dir.join("good.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n",
    )
    .unwrap();
    std::fs::write(dir.join("bad.yml"), "apiVersion: v1\nkind: [unclosed\n").unwrap();
    std::fs::write(dir.join("ignored.txt"), "not yaml at all: [").unwrap();
    let err = load_dir(&dir).unwrap_err();
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(err.problems[0].starts_with("bad.yml:"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_cache_reparses_only_changed_files_and_forgets_deleted_ones() {
    let dir = tempdir("cache");
    let ns = |name: &str| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n");
    std::fs::write(dir.join("a.yaml"), ns("a")).unwrap();
    std::fs::write(dir.join("b.yaml"), ns("b")).unwrap();
    let mut cache = ParseCache::default();
    assert_eq!(cache.load(&dir).unwrap().len(), 2);
    std::fs::write(dir.join("b.yaml"), ns("bee")).unwrap();
    let store = cache.load(&dir).unwrap();
    let names: Vec<String> = store
        .all::<k8s_openapi::api::core::v1::Namespace>()
        .keys()
        .map(|k| k.name.clone())
        .collect();
    assert_eq!(names, ["a", "bee"]);
    std::fs::remove_file(dir.join("a.yaml")).unwrap();
    assert_eq!(cache.load(&dir).unwrap().len(), 1);
    // A broken file fails the load and is retried next time.
    std::fs::write(dir.join("c.yaml"), "kind: [").unwrap();
    assert!(cache.load(&dir).is_err());
    assert!(cache.load(&dir).is_err());
    std::fs::write(dir.join("c.yaml"), ns("c")).unwrap();
    assert_eq!(cache.load(&dir).unwrap().len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_file_keeps_its_last_good_version_and_holds_back_no_other() {
    let dir = tempdir("each");
    let ns = |name: &str| format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n");
    let names = |store: &Store| -> Vec<String> {
        store
            .all::<k8s_openapi::api::core::v1::Namespace>()
            .keys()
            .map(|k| k.name.clone())
            .collect()
    };
    std::fs::write(dir.join("a.yaml"), ns("a")).unwrap();
    std::fs::write(dir.join("b.yaml"), ns("b")).unwrap();
    let mut cache = ParseCache::default();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert!(problems.is_empty());
    assert_eq!(names(&store), ["a", "b"]);
    // b breaks while a changes: a's change loads, b keeps its last good version.
    std::fs::write(dir.join("a.yaml"), ns("a2")).unwrap();
    std::fs::write(dir.join("b.yaml"), "kind: [").unwrap();
    std::fs::write(dir.join("c.yaml"), "apiVersion: v1\nkind: Nonsense\n").unwrap();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(names(&store), ["a2", "b"]);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].starts_with("b.yaml:"), "{problems:?}");
    assert!(problems[1].starts_with("c.yaml:"), "{problems:?}");
    assert!(cache.load(&dir).is_err(), "strict loading still fails");
    let _ = std::fs::remove_dir_all(&dir);
}

fn gateway(name: &str, port: u16) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: {name}}}\n\
         spec: {{gatewayClassName: aether, listeners: [{{name: http, port: {port}, protocol: HTTP}}]}}\n"
    )
}

fn port_of(store: &Store, name: &str) -> i32 {
    use gateway_api::apis::experimental::gateways::Gateway;
    store
        .get::<Gateway>("default", name)
        .expect("gateway")
        .spec
        .listeners[0]
        .port
}

#[test]
fn an_object_in_two_files_keeps_the_live_one_and_names_both_files() {
    let dir = tempdir("dup");
    std::fs::write(dir.join("b.yaml"), gateway("web", 80)).unwrap();
    let mut cache = ParseCache::default();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    // A file sorted before the live one brings the same Gateway: refused.
    std::fs::write(dir.join("a.yaml"), gateway("web", 81)).unwrap();
    let (store2, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(
        problems,
        [
            "a.yaml: Gateway default/web is already defined in b.yaml; this file keeps its last good version"
        ]
    );
    assert_eq!(port_of(&store, "web"), 80);
    assert_eq!(port_of(&store2, "web"), 80, "the live one stays");
    assert!(cache.load(&dir).is_err(), "strict loading fails");
    // Moved in one step (gone from b, added to a): no clash.
    std::fs::write(dir.join("b.yaml"), gateway("other", 82)).unwrap();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(port_of(&store, "web"), 81);
    // Two new files with the same object: the first by name wins.
    std::fs::write(dir.join("c.yaml"), gateway("twin", 90)).unwrap();
    std::fs::write(dir.join("d.yaml"), gateway("twin", 91)).unwrap();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].starts_with("d.yaml: Gateway default/twin is already defined in c.yaml"));
    assert_eq!(port_of(&store, "twin"), 90);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_over_the_size_cap_and_a_dangling_link_are_problems() {
    let dir = tempdir("limits");
    std::fs::write(dir.join("big.yaml"), format!("# {}\n", "x".repeat(2000))).unwrap();
    std::fs::write(dir.join("ok.yaml"), gateway("web", 80)).unwrap();
    std::os::unix::fs::symlink(dir.join("missing.yaml"), dir.join("link.yaml")).unwrap();
    let mut cache = ParseCache::new(Limits {
        max_file_bytes: 1000,
        ..Limits::default()
    });
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(port_of(&store, "web"), 80);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert_eq!(
        problems[0],
        "big.yaml: 2003 bytes, more than the 1000-byte limit (--max-file-bytes); not read"
    );
    assert_eq!(
        problems[1],
        "link.yaml: a symbolic link to nothing (its target is missing)"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn ns(name: &str) -> String {
    format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n")
}

pub(super) fn names(store: &Store) -> Vec<String> {
    store
        .all::<k8s_openapi::api::core::v1::Namespace>()
        .keys()
        .map(|k| k.name.clone())
        .collect()
}

fn quiet(settle: Duration) -> ParseCache {
    ParseCache::new(Limits {
        settle,
        ..Limits::default()
    })
}

/// Loads until nothing is held, waiting out each hold the cache names (the
/// quiet period is wall time: ctimes cannot be set back).
fn load_settled(cache: &mut ParseCache, dir: &Path) -> (Store, Vec<String>) {
    loop {
        let loaded = cache.load_each(dir, &Edits::default()).unwrap();
        match cache.held() {
            None => return loaded,
            Some(left) => std::thread::sleep(left),
        }
    }
}

#[test]
fn in_place_writes_wait_for_a_quiet_directory_and_a_move_is_read_at_once() {
    let dir = tempdir("quiet");
    let settle = Duration::from_millis(300);
    let mut cache = quiet(settle);
    std::fs::write(dir.join("a.yaml"), ns("a")).unwrap();
    let (store, _) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert!(store.is_empty(), "just written: not read yet");
    let left = cache.held().expect("held");
    assert!(left <= settle && left > settle / 2, "{left:?}");
    let (store, _) = load_settled(&mut cache, &dir);
    assert_eq!(names(&store), ["a"]);
    // A two-document file cut between its documents, closed: valid, not read.
    std::fs::write(dir.join("a.yaml"), ns("a2")).unwrap();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert!(problems.is_empty() && cache.held().is_some());
    assert_eq!(
        names(&store),
        ["a"],
        "the last good version serves meanwhile"
    );
    // Moved into place: read at once, though the directory is not quiet.
    std::fs::write(dir.join("b.tmp"), ns("b")).unwrap();
    std::fs::rename(dir.join("b.tmp"), dir.join("b.yaml")).unwrap();
    let moved = Edits {
        moved_in: [dir.join("b.yaml")].into(),
        ..Edits::default()
    };
    let (store, _) = cache.load_each(&dir, &moved).unwrap();
    assert_eq!(names(&store), ["a", "b"], "b at once, a still held");
    let (store, _) = load_settled(&mut cache, &dir);
    assert_eq!(names(&store), ["a2", "b"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_open_for_writing_waits_for_its_writer_even_in_a_quiet_directory() {
    let dir = tempdir("open");
    let mut cache = quiet(Duration::ZERO);
    std::fs::write(dir.join("a.yaml"), ns("a")).unwrap();
    let writing = Edits {
        open: [(dir.join("a.yaml"), Duration::from_secs(2))].into(),
        ..Edits::default()
    };
    let (store, _) = cache.load_each(&dir, &writing).unwrap();
    assert!(store.is_empty());
    assert_eq!(cache.held(), Some(OPEN_HOLD - Duration::from_secs(2)));
    let (store, _) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(names(&store), ["a"], "closed: read");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn removed_files_keep_their_objects_while_the_directory_is_refilled() {
    let dir = tempdir("refill");
    let settle = Duration::from_millis(400);
    let mut cache = quiet(settle);
    for n in ["a", "b", "c"] {
        std::fs::write(dir.join(format!("{n}.yaml")), ns(n)).unwrap();
    }
    assert_eq!(names(&load_settled(&mut cache, &dir).0), ["a", "b", "c"]);
    // Emptied, then refilled one file at a time, the objects moving files.
    for n in ["a", "b", "c"] {
        std::fs::remove_file(dir.join(format!("{n}.yaml"))).unwrap();
    }
    let (store, _) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(names(&store), ["a", "b", "c"], "removals wait for quiet");
    std::fs::write(dir.join("x.yaml"), ns("a")).unwrap();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(names(&store), ["a", "b", "c"], "{problems:?}");
    std::fs::write(dir.join("y.yaml"), ns("b")).unwrap();
    let (store, problems) = load_settled(&mut cache, &dir);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(names(&store), ["a", "b"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_emptied_file_waits_longer_than_the_quiet_period() {
    let dir = tempdir("emptied");
    let settle = Duration::from_millis(50);
    let mut cache = quiet(settle);
    std::fs::write(dir.join("a.yaml"), ns("a")).unwrap();
    load_settled(&mut cache, &dir);
    std::fs::write(dir.join("a.yaml"), "").unwrap();
    std::thread::sleep(settle * 2);
    let (store, _) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(names(&store), ["a"], "truncated, the write still to come");
    let left = cache.held().expect("held");
    assert!(left > EMPTIED_QUIET - Duration::from_secs(1), "{left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rewrite_that_keeps_size_and_mtime_is_read() {
    let dir = tempdir("same-size");
    let file = dir.join("a.yaml");
    std::fs::write(&file, ns("aa")).unwrap();
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    let mut cache = ParseCache::default();
    assert_eq!(names(&cache.load(&dir).unwrap()), ["aa"]);
    let before = fingerprint(&dir);
    std::fs::write(&file, ns("bb")).unwrap();
    std::fs::File::options()
        .append(true)
        .open(&file)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert_ne!(before, fingerprint(&dir));
    assert_eq!(names(&cache.load(&dir).unwrap()), ["bb"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn what_is_not_a_regular_file_inside_the_directory_is_a_problem_naming_it() {
    let dir = tempdir("special");
    std::fs::write(dir.join("ok.yaml"), ns("ok")).unwrap();
    let fifo = std::process::Command::new("mkfifo")
        .arg(dir.join("fifo.yaml"))
        .status()
        .unwrap();
    assert!(fifo.success());
    std::fs::create_dir(dir.join("dir.yaml")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("zero.yaml")).unwrap();
    std::os::unix::fs::symlink("/proc/kmsg", dir.join("kmsg.yaml")).unwrap();
    let outside = tempdir("special-outside");
    std::fs::write(outside.join("o.yaml"), ns("o")).unwrap();
    std::os::unix::fs::symlink(outside.join("o.yaml"), dir.join("out.yaml")).unwrap();
    let started = std::time::Instant::now();
    let (store, problems) = ParseCache::default()
        .load_each(&dir, &Edits::default())
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "nothing blocks");
    assert_eq!(names(&store), ["ok"]);
    let starts: Vec<&str> = problems
        .iter()
        .map(|p| p.split(':').next().unwrap())
        .collect();
    assert_eq!(
        starts,
        [
            "dir.yaml",
            "fifo.yaml",
            "kmsg.yaml",
            "out.yaml",
            "zero.yaml"
        ],
        "{problems:#?}"
    );
    assert!(
        problems[0].contains("a directory, not a regular file"),
        "{problems:#?}"
    );
    assert!(
        problems[1].contains("a FIFO, not a regular file"),
        "{problems:#?}"
    );
    for p in [&problems[2], &problems[3], &problems[4]] {
        assert!(p.contains("outside the config directory"), "{p}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&outside);
}

/// A ConfigMap volume: `name.yaml -> ..data/name.yaml`, `..data ->
/// ..2024_01_01_00_00_00.1`, swapped by renaming a new `..data` into place.
#[test]
fn a_configmap_volume_layout_loads_and_its_swap_is_seen() {
    let dir = tempdir("configmap");
    let version = |n: &str, body: &str| {
        let v = dir.join(format!("..{n}"));
        std::fs::create_dir(&v).unwrap();
        std::fs::write(v.join("a.yaml"), body).unwrap();
    };
    version("2024_01", &ns("one"));
    std::os::unix::fs::symlink("..2024_01", dir.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/a.yaml", dir.join("a.yaml")).unwrap();
    let mut cache = ParseCache::default();
    assert_eq!(names(&cache.load(&dir).unwrap()), ["one"]);
    version("2024_02", &ns("two"));
    std::os::unix::fs::symlink("..2024_02", dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    assert_eq!(names(&cache.load(&dir).unwrap()), ["two"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_past_the_total_budget_are_refused_and_the_loaded_ones_stay() {
    let dir = tempdir("budget");
    let padded = |n: &str| format!("{}# {}\n", ns(n), "x".repeat(900));
    std::fs::write(dir.join("a.yaml"), padded("a")).unwrap();
    std::fs::write(dir.join("b.yaml"), padded("b")).unwrap();
    let mut cache = ParseCache::new(Limits {
        max_total_bytes: 2500,
        ..Limits::default()
    });
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    std::fs::write(dir.join("c.yaml"), padded("c")).unwrap();
    let (store2, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(names(&store), names(&store2));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("c.yaml: 954 bytes would take the config directory to 2862 bytes, over the 2500-byte budget (--max-total-bytes)"),
        "{problems:?}"
    );
    std::fs::remove_file(dir.join("a.yaml")).unwrap();
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(names(&store), ["b", "c"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_shrinks_and_loses_objects_is_noted() {
    let dir = tempdir("shrink");
    let two = format!("{}---\n{}", ns("a"), ns("b"));
    std::fs::write(dir.join("a.yaml"), two).unwrap();
    let mut cache = ParseCache::default();
    cache.load(&dir).unwrap();
    assert!(cache.take_notes().is_empty());
    std::fs::write(dir.join("a.yaml"), ns("a")).unwrap();
    assert_eq!(names(&cache.load(&dir).unwrap()), ["a"]);
    let notes = cache.take_notes();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0]
            .starts_with("a.yaml: shrank from 106 to 51 bytes, losing 1 object(s) (Namespace b)"),
        "{notes:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_seeded_file_serves_until_its_file_loads() {
    let dir = tempdir("seed");
    std::fs::write(dir.join("a.yaml"), "kind: [").unwrap();
    std::fs::write(dir.join("b.yaml"), ns("b2")).unwrap();
    let mut cache = ParseCache::default().keeping_text();
    let bad = cache.seed(
        &dir,
        vec![("a.yaml".into(), ns("a")), ("b.yaml".into(), ns("b"))],
    );
    assert!(bad.is_empty(), "{bad:?}");
    let (store, problems) = cache.load_each(&dir, &Edits::default()).unwrap();
    assert_eq!(names(&store), ["a", "b2"]);
    assert_eq!(problems.len(), 1);
    assert!(problems[0].starts_with("a.yaml:"), "{problems:?}");
    let served: Vec<String> = cache
        .served_files()
        .into_iter()
        .map(|(n, t)| format!("{n}={}", t.text()))
        .collect();
    assert_eq!(
        served,
        [
            format!("a.yaml={}", ns("a")),
            format!("b.yaml={}", ns("b2"))
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What noticing a change costs at 5,000 files: one stat per file for the
/// fingerprint (size, mtime, ctime, inode: the same call the old size and
/// mtime took), and a load that finds nothing changed. Run with `--ignored
/// --nocapture` to see the numbers.
#[test]
#[ignore = "a measurement"]
fn change_detection_at_5000_files() {
    let dir = tempdir("5000");
    for i in 0..5000 {
        std::fs::write(dir.join(format!("f{i:04}.yaml")), ns(&format!("n{i}"))).unwrap();
    }
    let mut cache = ParseCache::default();
    let started = std::time::Instant::now();
    assert_eq!(cache.load(&dir).unwrap().len(), 5000);
    let first = started.elapsed();
    let runs = 20;
    let started = std::time::Instant::now();
    for _ in 0..runs {
        std::hint::black_box(fingerprint(&dir));
    }
    let fp = started.elapsed() / runs;
    let started = std::time::Instant::now();
    for _ in 0..runs {
        cache.load(&dir).unwrap();
    }
    let unchanged = started.elapsed() / runs;
    eprintln!(
        "5,000 files: first load {first:?}, fingerprint {fp:?}, load with nothing changed {unchanged:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
