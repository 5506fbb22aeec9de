//! What one run of a workload measured, and the process's resident bytes it reads.

/// What one run of a workload measured.
pub struct Measured {
    /// Nanoseconds per timed call (or pair of calls).
    pub latencies: Vec<u64>,
    /// Growth of the resident set while the workload's buffers were allocated.
    pub buffer_bytes: Option<i64>,
    /// Growth of the resident set over what the workload says (its timed calls, mostly).
    pub resident_growth: Option<i64>,
    /// Nanoseconds of each timed synchronize, also among `latencies`, where a workload
    /// times them apart (a few among thousands of calls, which no percentile shows).
    pub waits: Vec<u64>,
    /// The same for each timed collective (`training_step_synced_ddp`'s bucket all-reduces).
    pub collectives: Vec<u64>,
}

impl Measured {
    pub fn of(latencies: Vec<u64>) -> Measured {
        Measured { latencies, buffer_bytes: None, resident_growth: None, waits: Vec::new(), collectives: Vec::new() }
    }
}

/// Resident bytes of this process.
pub fn resident_bytes() -> i64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: i64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("statm resident pages");
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as i64
}
