//! Which kernels of a module wait on their grid dependencies (`cudaGridDependencySynchronize`,
//! PTX `griddepcontrol.wait`), and where the first wait lies in Hopper code, read from the code
//! the driver loaded: a kernel launched with programmatic stream serialization that never waits
//! overlaps the kernel before it, and one that waits overlaps it with what comes before its
//! wait.

use std::collections::HashMap;

use crate::image;

/// What an image says of its kernels' grid-dependency waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waits {
    /// The kernels (by symbol) whose code holds a wait, each with the byte offset of its
    /// first wait in its code where the code is machine code (None for PTX); every other
    /// kernel has none.
    In(HashMap<String, Option<u32>>),
    /// Code this reader cannot tell: a fatbinary, a malformed image, or machine code of an
    /// architecture whose encoding of the wait it does not know.
    Unknown,
}

/// Reads `image`: an ELF cubin, or PTX text.
pub fn of(image: &[u8]) -> Waits {
    if let Some((flags, sections)) = image::cubin(image) {
        cubin(image, flags, &sections).unwrap_or(Waits::Unknown)
    } else if let Some(lines) = image::ptx(image) {
        ptx(&lines)
    } else {
        Waits::Unknown
    }
}

/// Hopper's (`sm_90`) encoding of `griddepcontrol.wait`, `ACQBULK`: an instruction with no
/// operand whose first eight bytes are this, but for its predicate (bits 12 to 15). Read
/// from `cuobjdump -sass` of nvcc 13's code on an H200.
const ACQBULK: u64 = 0x082e;
const PREDICATE: u64 = 0xf000;

/// A cubin for `sm_90` (`flags`, its `e_flags`): the kernels whose `.text.<symbol>` section
/// holds an `ACQBULK`, each with the offset of the first from the section's start (the
/// kernel's first instruction). None for another architecture (its encoding may differ).
fn cubin(image: &[u8], flags: u32, sections: &[image::Section<'_>]) -> Option<Waits> {
    // The architecture: `e_flags` bits 8 to 15 in the ELF ABI of CUDA 12.8 and later, bits 0
    // to 7 before it.
    if (flags >> 8) & 0xff != 90 && flags & 0xff != 90 {
        return None;
    }
    let mut waiting = HashMap::new();
    for section in sections {
        let Some(kernel) = section.name.strip_prefix(".text.") else { continue };
        let first = section.bytes(image)?.chunks_exact(16).position(|instruction| {
            u64::from_le_bytes(instruction[..8].try_into().expect("8")) & !PREDICATE == ACQBULK
        });
        if let Some(at) = first {
            waiting.insert(kernel.to_string(), Some(u32::try_from(at * 16).ok()?));
        }
    }
    Some(Waits::In(waiting))
}

/// PTX: the entries whose body holds `griddepcontrol.wait` (where the wait lands in the code
/// the driver compiles from it is not known).
fn ptx(lines: &[(i32, String)]) -> Waits {
    let mut waiting = HashMap::new();
    let mut entry = None::<&str>;
    for (depth, code) in lines {
        if *depth == 0 {
            if let Some(name) = image::ptx_entry(code) {
                entry = Some(name);
            }
        } else if code.contains("griddepcontrol.wait") {
            waiting.extend(entry.map(|e| (e.to_string(), None)));
        }
    }
    Waits::In(waiting)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[(&str, Option<u32>)]) -> Waits {
        Waits::In(n.iter().map(|&(s, at)| (s.to_string(), at)).collect())
    }

    #[test]
    fn ptx_entries_that_wait_are_found() {
        let ptx = ".version 8.0\n.target sm_90\n.visible .entry waits(\n .param .u64 p\n)\n{\n griddepcontrol.wait;\n ret;\n}\n\
                   .visible .entry never(\n .param .u64 p\n)\n{\n // griddepcontrol.wait;\n ret;\n}\n";
        assert_eq!(of(ptx.as_bytes()), names(&[("waits", None)]));
    }

    /// A cubin with one `.text.<kernel>` section per kernel, each its instructions' first
    /// eight bytes (the other eight zero), for the architecture `sm`.
    fn cubin_image(sm: u32, kernels: &[(&str, &[u64])]) -> Vec<u8> {
        let mut names = vec![0u8];
        let mut offsets = Vec::new();
        for (kernel, _) in kernels {
            offsets.push(names.len() as u32);
            names.extend_from_slice(format!(".text.{kernel}\0").as_bytes());
        }
        let shstrtab_name = names.len() as u32;
        names.extend_from_slice(b".shstrtab\0");
        let mut image = vec![0u8; 64];
        image[..4].copy_from_slice(b"\x7fELF");
        image[4] = 2;
        image[5] = 1;
        image[0x30..0x34].copy_from_slice(&(0x0600_0004 | sm << 8).to_le_bytes());
        let names_at = image.len();
        image.extend(&names);
        let mut sections = vec![(0u32, 0u64, 0u64)];
        for (i, (_, code)) in kernels.iter().enumerate() {
            let at = image.len();
            for word in *code {
                image.extend(word.to_le_bytes());
                image.extend([0u8; 8]);
            }
            sections.push((offsets[i], at as u64, (code.len() * 16) as u64));
        }
        sections.push((shstrtab_name, names_at as u64, names.len() as u64));
        let shoff = image.len();
        image[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        image[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        image[0x3c..0x3e].copy_from_slice(&(sections.len() as u16).to_le_bytes());
        image[0x3e..0x40].copy_from_slice(&((sections.len() - 1) as u16).to_le_bytes());
        for (name, offset, size) in sections {
            let mut h = vec![0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[24..32].copy_from_slice(&offset.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            image.extend(h);
        }
        image
    }

    #[test]
    fn hopper_kernels_holding_acqbulk_wait_at_their_first_one() {
        // ACQBULK as nvcc 13 encodes it (always: 0x782e), guarded by @P0 (0x082e), beside
        // PREEXIT (launch_dependents, 0x782d) and other instructions; the offset is the
        // first wait's, 16 bytes an instruction.
        let image = cubin_image(
            90,
            &[
                ("waits", &[0x1234_5678_0000_7b82, 0x782e]),
                ("guarded", &[0x082e]),
                ("twice", &[0x7b82, 0x7b82, 0x782e, 0x7b82, 0x782e]),
                ("never", &[0x782d, 0x7b82]),
            ],
        );
        assert_eq!(of(&image), names(&[("waits", Some(16)), ("guarded", Some(0)), ("twice", Some(32))]));
    }

    #[test]
    fn other_architectures_and_images_are_unknown() {
        assert_eq!(of(&cubin_image(100, &[("waits", &[0x782e])])), Waits::Unknown);
        assert_eq!(of(b"\x50\xed\x55\xba fatbinary"), Waits::Unknown);
    }
}
