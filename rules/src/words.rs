//! How findings say quantities.

/// A duration in seconds as people say it: `45 s`, `5 min`, `6 min 40 s`, `1 h`, `1 h 20 min`.
pub fn duration(seconds: f64) -> String {
    let seconds = seconds.round() as u64;
    match (seconds / 3600, seconds % 3600 / 60, seconds % 60) {
        (0, 0, seconds) => format!("{seconds} s"),
        (0, minutes, 0) => format!("{minutes} min"),
        (0, minutes, seconds) => format!("{minutes} min {seconds} s"),
        (hours, 0, _) => format!("{hours} h"),
        (hours, minutes, _) => format!("{hours} h {minutes} min"),
    }
}
