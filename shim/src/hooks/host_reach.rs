//! Launches and memsets that reach memory the host reaches (managed, pinned, registered):
//! queued with those bytes guarded by the host-race guard, so that the host touching them
//! before it synchronizes with the operation is a host race. A buffer a kernel's channel
//! parameter points into (a flag it polls) is how the kernel and the host talk while it
//! runs: not guarded for that launch.

use streamsan::model::clock::Epoch;
use streamsan::model::op::{HostEffect, Mode};
use streamsan::model::streams::StreamRef;
use streamsan::model::{Model, Work};
use streamsan::phases::Phase;

use super::batch;
use super::call::handle_of;
use crate::host_races;
use crate::intercept::driver;

/// Byte ranges `(address, length)` read and written.
type Ranges = (Vec<(u64, u64)>, Vec<(u64, u64)>);

/// Queues `work` on `on` as [`batch::queue`] does, guarding first what it reaches of memory
/// the host reaches, but for the buffers of `channels` (a launch's channel pointers).
pub fn queue(model: &Model, on: StreamRef, work: Work<'_>, phase: Phase, channels: &[u64]) {
    let pending = reached(model, on, &work, channels).and_then(|(reads, writes)| {
        host_races::work_queued(&work.origin, work.kernel, model.slot_of(on), &reads, &writes)
    });
    match pending {
        Some(pending) => batch::queue_guarded(model, on, work, phase, pending),
        None => batch::queue(model, on, work, phase),
    }
}

/// Managed buffers guarded at most beside a measured launch's own ([`issued`]).
const UNSURE_BUFFERS: usize = 64;

/// After `work` was told to the model at once as `epoch` (a launch being measured): guards
/// what it reaches of memory the host reaches, but for the buffers of `channels`. Its
/// footprint is not known before it runs, and a kernel given managed memory may reach more
/// of it through pointers it loads there (a table of managed pointers): the other managed
/// buffers are guarded too, a fault there a race only where the footprint, once read, says
/// the launch touched those bytes.
pub fn issued(model: &Model, on: StreamRef, work: &Work<'_>, epoch: Epoch, channels: &[u64]) {
    if let Some((reads, writes)) = reached(model, on, work, channels) {
        let own = |base: u64, end: u64| {
            let addrs = reads.iter().chain(&writes).map(|&(addr, _)| addr);
            addrs.chain(channels.iter().copied()).any(|addr| base <= addr && addr < end)
        };
        let unsure: Vec<(u64, u64)> = model
            .managed_buffers(UNSURE_BUFFERS)
            .into_iter()
            .filter(|&(base, end)| !own(base, end))
            .map(|(base, end)| (base, end - base))
            .collect();
        host_races::work_issued(&work.origin, work.kernel, epoch, &reads, &writes, &unsure);
    }
}

/// What `work` reaches of memory the host reaches, outside the buffers of `channels`, when
/// the guard is on and the host does not wait for it: None at once (one range test per
/// access) for work that reaches none. A pointer from a kernel's parameters reaches to its
/// buffer's end (the kernel may index it anywhere past it); a measured or learnt range is
/// its own bytes. Work on a stream that may be capturing runs only with its graph, and is
/// not guarded.
fn reached(model: &Model, on: StreamRef, work: &Work<'_>, channels: &[u64]) -> Option<Ranges> {
    if !host_races::enabled() || work.host != HostEffect::None {
        return None;
    }
    let range = model.host_reachable_range();
    if !work.accesses.iter().any(|a| range.contains(&a.addr)) || driver::may_be_capturing(handle_of(on)) {
        return None;
    }
    let talked_through: Vec<(u64, u64)> = channels.iter().filter_map(|&c| model.host_reachable_at(c)).collect();
    let (mut reads, mut writes) = (Vec::new(), Vec::new());
    for access in work.accesses.iter().filter(|a| range.contains(&a.addr)) {
        let Some((base, end)) = model.host_reachable_at(access.addr) else { continue };
        if talked_through.contains(&(base, end)) {
            continue;
        }
        let reach = if access.len <= 1 { end } else { (access.addr + access.len).min(end) };
        let bytes = (access.addr, reach - access.addr);
        match access.mode {
            Mode::Read => reads.push(bytes),
            _ => writes.push(bytes),
        }
    }
    (!reads.is_empty() || !writes.is_empty()).then_some((reads, writes))
}
