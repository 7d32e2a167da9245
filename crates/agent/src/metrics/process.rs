//! The standard `process_*` metrics, read from `/proc/self` at each scrape.
//!
//! ```text
//!  /proc/self/stat   utime + stime (clock ticks) ─► process_cpu_seconds_total
//!                    starttime (ticks after boot) + /proc/stat btime ─► process_start_time_seconds
//!                    vsize (bytes), rss (pages) ─► process_virtual_memory_bytes, process_resident_memory_bytes
//!  /proc/self/fd     entries ─► process_open_fds
//! ```
//!
//! Elsewhere than Linux (no `/proc`) it shows nothing.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// What the process uses, as `/proc` tells it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub start_time_seconds: f64,
    pub virtual_memory_bytes: u64,
    pub resident_memory_bytes: u64,
}

impl ProcessStats {
    /// From the text of `/proc/self/stat`, the boot time (`btime` of
    /// `/proc/stat`), clock ticks per second and the page size.
    pub fn parse(stat: &str, boot_time: u64, ticks: u64, page_size: u64) -> Option<Self> {
        // The command name (field 2) is in parentheses and may hold spaces
        // and parentheses itself; the fields after the last `)` start at 3.
        let after_comm = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = after_comm.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        let ticks = ticks.max(1) as f64;
        Some(ProcessStats {
            cpu_seconds: (field(14)? + field(15)?) as f64 / ticks,
            start_time_seconds: boot_time as f64 + field(22)? as f64 / ticks,
            virtual_memory_bytes: field(23)?,
            resident_memory_bytes: field(24)? * page_size,
        })
    }

    /// This process's, now; `None` without a readable `/proc`.
    pub fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let boot_time = std::fs::read_to_string("/proc/stat")
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("btime ")?.trim().parse().ok())?;
        let ticks = rustix::param::clock_ticks_per_second();
        Self::parse(&stat, boot_time, ticks, rustix::param::page_size() as u64)
    }
}

/// Open file descriptors (the directory listing's own included).
fn open_fds() -> Option<u64> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count() as u64)
}

/// Registered at the root of the registry: the names are the standard ones.
#[derive(Debug)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(stats) = ProcessStats::read() else {
            return Ok(());
        };
        ConstCounter::new(stats.cpu_seconds).encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            MetricType::Counter,
        )?)?;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                stats.resident_memory_bytes as f64,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stats.virtual_memory_bytes as f64,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                stats.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
        }
        if let Some(fds) = open_fds() {
            let gauge = ConstGauge::new(fds as i64);
            gauge.encode(encoder.encode_descriptor(
                "process_open_fds",
                "Number of open file descriptors.",
                None,
                MetricType::Gauge,
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_after_the_command_name_are_counted_from_three() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt
        // majflt cmajflt utime stime cutime cstime priority nice threads
        // itrealvalue starttime vsize rss ...
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    250 50 0 0 20 0 8 0 12000 104857600 2560 18446744073709551615";
        let s = ProcessStats::parse(stat, 1_700_000_000, 100, 4096).unwrap();
        assert_eq!(s.cpu_seconds, 3.0);
        assert_eq!(s.start_time_seconds, 1_700_000_120.0);
        assert_eq!(s.virtual_memory_bytes, 104_857_600);
        assert_eq!(s.resident_memory_bytes, 2560 * 4096);
        assert_eq!(ProcessStats::parse("4242 (cut", 0, 100, 4096), None);
    }

    #[test]
    fn this_process_reads_as_started_in_the_past_with_memory_and_files() {
        let Some(s) = ProcessStats::read() else {
            return; // no /proc here
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(s.start_time_seconds <= now + 1.0 && s.start_time_seconds > now - 86_400.0 * 365.0);
        assert!(s.resident_memory_bytes > 0 && s.virtual_memory_bytes >= s.resident_memory_bytes);
        assert!(open_fds().unwrap() >= 3);
    }
}
