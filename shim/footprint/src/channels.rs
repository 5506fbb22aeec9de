//! Which pointer parameters of a kernel are channels to the host: read from PTX, a parameter
//! whose pointer reaches a `volatile` or system-scoped load, store or atomic
//! (`ld.volatile`, `ld.relaxed.sys`, `ld.acquire.sys`, `st.release.sys`, `atom.sys`, ...).
//! Such an access is how a kernel and the host talk while the kernel runs (a flag the kernel
//! polls, which the host sets): the host's accesses to that memory are the protocol, not a
//! race with the kernel.
//!
//! A pointer is followed through the registers computed from it (moves, conversions,
//! arithmetic), not through memory: a pointer loaded from a table is another buffer's. Nor
//! through calls to `.func`s (nvcc inlines nearly all of them).

use std::collections::HashMap;

use crate::image;

/// Parameters followed at most per kernel: a channel among later ones is not seen.
const MAX_PARAMS: usize = 64;

/// For each `.entry` of a PTX image (by symbol) that has channels, the indices of those
/// parameters. None for an image that is not PTX text.
pub fn of(image: &[u8]) -> Option<HashMap<String, Vec<usize>>> {
    let lines = image::ptx(image)?;
    let mut found = HashMap::new();
    let mut at = 0;
    while at < lines.len() {
        let (depth, code) = &lines[at];
        let Some(name) = image::ptx_entry(code).filter(|_| *depth == 0) else {
            at += 1;
            continue;
        };
        // The header, up to the body's brace; then the body, every line inside it.
        let mut header = String::new();
        while at < lines.len() && lines[at].0 == 0 {
            let code = &lines[at].1;
            header.push_str(code.split('{').next().unwrap_or_default());
            header.push(' ');
            at += 1;
            if code.contains('{') {
                break;
            }
        }
        let start = at;
        while at < lines.len() && lines[at].0 > 0 {
            at += 1;
        }
        let body: Vec<&str> = lines[start..at].iter().map(|(_, code)| code.as_str()).collect();
        let channels = entry_channels(&params_of(&header), &body.join("\n"));
        if !channels.is_empty() {
            found.insert(name.to_string(), channels);
        }
    }
    Some(found)
}

/// The names of the parameters a header declares, in order.
fn params_of(header: &str) -> Vec<&str> {
    let (Some(open), Some(close)) = (header.find('('), header.rfind(')')) else { return Vec::new() };
    header[open + 1..close.max(open + 1)]
        .split(',')
        .filter_map(|decl| decl.split_whitespace().last())
        .map(|name| name.split('[').next().unwrap_or(name))
        .collect()
}

/// Whether a memory instruction's qualifiers (`opcode` split at its dots) make it a channel
/// access: volatile, or system-scoped, to memory that is not the kernel's own (shared, local,
/// parameter or constant space).
fn communicates(qualifiers: &[&str]) -> bool {
    let memory = matches!(qualifiers.first(), Some(&("ld" | "st" | "atom" | "red")));
    let own_space = qualifiers.iter().any(|q| matches!(*q, "shared" | "local" | "param" | "const"));
    memory && !own_space && qualifiers.iter().any(|q| matches!(*q, "volatile" | "sys"))
}

/// The parameters of one entry (`params`, by name) whose pointers reach a channel access in
/// its `body`.
fn entry_channels(params: &[&str], body: &str) -> Vec<usize> {
    let statements: Vec<(Vec<&str>, Vec<&str>)> = body
        .split(';')
        .filter_map(|statement| {
            // A label and a predicate guard before the opcode, braces of nested scopes.
            let statement = statement.trim_matches(|c: char| c.is_whitespace() || c == '{' || c == '}');
            let statement =
                statement.rsplit_once(':').filter(|(label, _)| !label.contains('[')).map_or(statement, |s| s.1);
            let mut words = statement.trim().splitn(2, char::is_whitespace);
            let mut opcode = words.next()?;
            let mut rest = words.next().unwrap_or_default();
            if opcode.starts_with('@') {
                let mut after = rest.trim().splitn(2, char::is_whitespace);
                opcode = after.next()?;
                rest = after.next().unwrap_or_default();
            }
            // Declarations (`.reg`, `.shared`, `.param`) compute nothing.
            if opcode.is_empty() || opcode.starts_with('.') {
                return None;
            }
            let operands = rest.split(',').map(|o| o.trim_matches(|c: char| c.is_whitespace() || c == '{' || c == '}'));
            Some((opcode.split('.').collect(), operands.collect()))
        })
        .collect();
    let param_bit = |word: &str| params.iter().take(MAX_PARAMS).position(|p| *p == word).map_or(0u64, |i| 1 << i);
    // The register or name inside a memory operand, `[base+offset]`.
    let base = |operands: &[&str]| {
        let inner = operands.iter().find_map(|o| o.strip_prefix('['))?.split(']').next()?;
        Some(inner.split('+').next().unwrap_or(inner).trim().to_string())
    };
    let mut derived: HashMap<&str, u64> = HashMap::new();
    let mut channels = 0u64;
    // Until nothing changes: a loop's back edge carries a register computed after its use.
    for _ in 0..statements.len().max(1) {
        let mut changed = false;
        for (qualifiers, operands) in &statements {
            let taint = |word: &str, derived: &HashMap<&str, u64>| {
                let word = word.trim();
                param_bit(word) | derived.get(word).copied().unwrap_or(0)
            };
            let (flows, address) = match qualifiers[0] {
                // A parameter's value, read from its space (by name or through its address).
                "ld" if qualifiers.contains(&"param") => (base(operands), None),
                // What memory holds is data, not the pointer it was read through.
                "ld" | "ldu" | "atom" | "st" | "red" => (None, base(operands)),
                _ => (None, None),
            };
            if let Some(address) = address {
                if communicates(qualifiers) {
                    channels |= taint(&address, &derived);
                }
                continue;
            }
            let Some(target) = operands.first().filter(|t| !t.is_empty()) else { continue };
            let from = match flows {
                Some(address) => taint(&address, &derived),
                None => operands[1..].iter().fold(0, |bits, o| bits | taint(o, &derived)),
            };
            let held = derived.entry(target).or_default();
            if *held | from != *held {
                *held |= from;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    (0..params.len().min(MAX_PARAMS)).filter(|i| channels & (1 << i) != 0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channels(ptx: &str) -> HashMap<String, Vec<usize>> {
        of(ptx.as_bytes()).expect("PTX")
    }

    /// A flag polled through a volatile load (XLA's `DelayKernel`), beside a buffer read
    /// plainly: the flag's parameter is a channel, the buffer's not.
    #[test]
    fn a_parameter_polled_through_a_volatile_load_is_a_channel() {
        let ptx = ".version 7.0\n.target sm_52\n.address_size 64\n\
            .visible .entry poll(\n .param .u64 poll_param_0,\n .param .u64 poll_param_1\n)\n{\n\
            .reg .pred %p<2>;\n .reg .b32 %r<3>;\n .reg .b64 %rd<5>;\n\
            ld.param.u64 %rd1, [poll_param_0];\n ld.param.u64 %rd2, [poll_param_1];\n\
            cvta.to.global.u64 %rd3, %rd2;\n ld.global.u32 %r2, [%rd3];\n\
            cvta.to.global.u64 %rd4, %rd1;\n\
            $L__BB0_1:\n ld.volatile.global.u32 %r1, [%rd4+4];\n\
            setp.eq.s32 %p1, %r1, 0;\n @%p1 bra $L__BB0_1;\n ret;\n}\n\
            .visible .entry plain(.param .u64 plain_param_0)\n{\n .reg .b64 %rd<3>;\n .reg .b32 %r<2>;\n\
            ld.param.u64 %rd1, [plain_param_0];\n cvta.to.global.u64 %rd2, %rd1;\n ld.global.u32 %r1, [%rd2];\n\
            ret;\n}\n";
        assert_eq!(channels(ptx), HashMap::from([("poll".to_string(), vec![0])]));
    }

    /// `cuda::atomic_ref` with system scope: relaxed, acquire and release accesses and
    /// atomics at `.sys`, through a pointer offset by an index; a `.gpu` atomic and a
    /// volatile access to shared memory are not channels.
    #[test]
    fn system_scoped_accesses_are_channels_and_narrower_scopes_are_not() {
        let ptx = ".version 8.0\n.target sm_90\n.address_size 64\n\
            .visible .entry k(\n .param .u64 k_param_0, .param .u64 k_param_1, .param .u64 k_param_2,\n\
            .param .u64 k_param_3, .param .u32 k_param_4\n)\n{\n\
            .shared .align 4 .b8 tile[64];\n\
            ld.param.u64 %rd1, [k_param_0];\n ld.param.u64 %rd2, [k_param_1];\n\
            ld.param.u64 %rd3, [k_param_2];\n ld.param.u64 %rd4, [k_param_3];\n ld.param.u32 %r1, [k_param_4];\n\
            mul.wide.u32 %rd5, %r1, 4;\n add.s64 %rd6, %rd1, %rd5;\n\
            ld.acquire.sys.global.u32 %r2, [%rd6];\n\
            st.release.sys.global.u32 [%rd2], %r2;\n\
            atom.gpu.global.add.u32 %r3, [%rd3], 1;\n\
            ld.volatile.shared.u32 %r4, [tile];\n\
            @%p1 atom.sys.global.add.u32 %r5, [%rd4], 1;\n ret;\n}\n";
        // The index parameter (4) is part of the address too, and names no buffer.
        assert_eq!(channels(ptx), HashMap::from([("k".to_string(), vec![0, 1, 3, 4])]));
    }

    /// A pointer loaded from a table the parameter points at is the table's content: the
    /// table is no channel for a volatile access through it.
    #[test]
    fn a_pointer_loaded_from_memory_is_not_its_table_s_parameter() {
        let ptx = ".version 7.0\n.visible .entry t(.param .u64 t_param_0)\n{\n\
            ld.param.u64 %rd1, [t_param_0];\n ld.global.u64 %rd2, [%rd1];\n\
            ld.volatile.global.u32 %r1, [%rd2];\n ret;\n}\n";
        assert_eq!(channels(ptx), HashMap::new());
    }

    #[test]
    fn other_images_are_not_read() {
        assert_eq!(of(b"\x7fELF\x02\x01"), None);
    }
}
