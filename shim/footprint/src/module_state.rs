//! The state a module keeps of its own (`__device__`, `__constant__` and `__managed__`
//! variables), read from the code the driver loaded: a twin of the module has its own copy
//! of each, which must hold the program's values while a launch runs on the twin.

use crate::image;

/// What an image says of its module-scope state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    /// The variables at module scope (none: a twin computes what the module does).
    Variables(Vec<Variable>),
    /// Neither a cubin nor PTX text (a fatbinary, or a malformed image), or state without a
    /// name to find it by.
    Unknown,
}

/// A variable at module scope, found by its name (`cuModuleGetGlobal`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    /// Whether kernels may write it (global or managed memory, not constant memory).
    pub writable: bool,
}

/// Reads `image`: an ELF cubin, or PTX text.
pub fn of(image: &[u8]) -> State {
    if let Some((_, sections)) = image::cubin(image) {
        cubin(image, &sections).unwrap_or(State::Unknown)
    } else if let Some(lines) = image::ptx(image) {
        ptx(&lines)
    } else {
        State::Unknown
    }
}

/// Whether a section's symbols are module-scope variables, and writable ones: global memory
/// (`.nv.global`, `.nv.global.init`), managed variables, user constants (`.nv.constant<bank>`
/// without a kernel's suffix: the per-kernel banks hold parameters and literals).
fn holds_variables(section: &str) -> Option<bool> {
    if section.starts_with(".nv.global") || section.starts_with(".nv.managed") {
        return Some(true);
    }
    let bank = section.strip_prefix(".nv.constant")?;
    (!bank.is_empty() && bank.bytes().all(|b| b.is_ascii_digit())).then_some(false)
}

/// A cubin: the object symbols of nonzero size in sections that hold variables. A
/// global-memory section of nonzero size with no such symbol holds state with no name
/// (`Unknown`).
fn cubin(image: &[u8], sections: &[image::Section<'_>]) -> Option<State> {
    const SHT_SYMTAB: u32 = 2;
    const STT_OBJECT: u8 = 1;
    let mut unnamed: Vec<usize> =
        (0..sections.len()).filter(|&i| sections[i].name.starts_with(".nv.global") && sections[i].size > 0).collect();
    let mut variables = Vec::new();
    for table in sections.iter().filter(|s| s.kind == SHT_SYMTAB) {
        let strings = sections.get(table.link)?.offset;
        for symbol in table.bytes(image)?.chunks_exact(24) {
            let kind = symbol[4] & 0xf;
            let section = usize::from(u16::from_le_bytes([symbol[6], symbol[7]]));
            let bytes = u64::from_le_bytes(symbol[16..24].try_into().expect("8"));
            let Some(writable) = sections.get(section).and_then(|s| holds_variables(s.name)) else { continue };
            if kind != STT_OBJECT || bytes == 0 {
                continue;
            }
            let name =
                image::string_at(image, strings, u32::from_le_bytes(symbol[..4].try_into().expect("4")) as usize)?;
            if name.is_empty() {
                return Some(State::Unknown);
            }
            unnamed.retain(|&s| s != section);
            variables.push(Variable { name: name.to_string(), writable });
        }
    }
    Some(if unnamed.is_empty() { State::Variables(variables) } else { State::Unknown })
}

/// PTX: the `.global` and `.const` variables declared outside every function.
fn ptx(lines: &[(i32, String)]) -> State {
    let mut variables = Vec::new();
    for (_, code) in lines.iter().filter(|(depth, _)| *depth == 0) {
        let words: Vec<&str> = code.split_whitespace().collect();
        let Some(space) = words.iter().find(|w| **w == ".global" || **w == ".const") else { continue };
        // `.visible .global .align 4 .u32 name[8] = {...};`: the word after the type.
        let declared = code.split(['=', ';']).next().unwrap_or_default();
        let Some(name) = declared.split_whitespace().last().map(|n| n.split('[').next().unwrap_or(n)) else {
            return State::Unknown;
        };
        variables.push(Variable { name: name.to_string(), writable: *space == ".global" });
    }
    State::Variables(variables)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ptx_variables_outside_functions_are_state() {
        let kernel = ".version 8.0\n.target sm_90\n.visible .entry k(.param .u64 p)\n{\n .reg .b32 %r<2>;\n ld.global.u32 %r1, [p];\n}\n";
        assert_eq!(of(kernel.as_bytes()), State::Variables(vec![]));
        let with_global = format!(".version 8.0\n.visible .global .align 4 .u32 counter;\n{kernel}");
        assert_eq!(of(with_global.as_bytes()), variables(&[("counter", true)]));
        let with_const = format!(".version 8.0\n.const .align 4 .b8 table[64] = {{1, 2}};\n{kernel}");
        assert_eq!(of(with_const.as_bytes()), variables(&[("table", false)]));
    }

    fn variables(v: &[(&str, bool)]) -> State {
        State::Variables(v.iter().map(|&(name, writable)| Variable { name: name.into(), writable }).collect())
    }

    #[test]
    fn other_images_are_unknown() {
        assert_eq!(of(&[0x50, 0xed, 0x55, 0xba, 1, 0, 0, 0]), State::Unknown);
        assert_eq!(of(b"\x7fELF\x02\x01garbage"), State::Unknown);
    }

    /// A minimal ELF64 with the given sections, each `(name, type, size)`, and one symbol
    /// table whose symbols are `(section index, type, size)`, named `v<index>`; one string
    /// table holds the sections' and the symbols' names.
    fn elf_image(sections: &[(&str, u32, u64)], symbols: &[(u16, u8, u64)]) -> Vec<u8> {
        let mut names = vec![0u8];
        let mut name_offsets = Vec::new();
        for (name, _, _) in sections.iter().chain([(".shstrtab", 3, 0), (".symtab", 2, 0)].iter()) {
            name_offsets.push(names.len() as u32);
            names.extend_from_slice(name.as_bytes());
            names.push(0);
        }
        let mut symtab = vec![0u8; 24]; // the null symbol
        for (i, &(section, kind, size)) in symbols.iter().enumerate() {
            let mut s = vec![0u8; 24];
            s[..4].copy_from_slice(&(names.len() as u32).to_le_bytes());
            names.extend_from_slice(format!("v{i}\0").as_bytes());
            s[4] = kind;
            s[6..8].copy_from_slice(&section.to_le_bytes());
            s[16..24].copy_from_slice(&size.to_le_bytes());
            symtab.extend(s);
        }
        let mut image = vec![0u8; 64];
        image[..4].copy_from_slice(b"\x7fELF");
        image[4] = 2;
        image[5] = 1;
        let names_at = image.len();
        image.extend(&names);
        let symtab_at = image.len();
        image.extend(&symtab);
        let shoff = image.len();
        let count = sections.len() + 3; // null, the sections, .shstrtab, .symtab
        image[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        image[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        image[0x3c..0x3e].copy_from_slice(&(count as u16).to_le_bytes());
        image[0x3e..0x40].copy_from_slice(&((count - 2) as u16).to_le_bytes());
        image.extend([0u8; 64]);
        let all: Vec<(u32, u32, u64, u64)> = sections
            .iter()
            .enumerate()
            .map(|(i, &(_, kind, size))| (name_offsets[i], kind, 0, size))
            .chain([
                (name_offsets[sections.len()], 3, names_at as u64, names.len() as u64),
                (name_offsets[sections.len() + 1], 2, symtab_at as u64, symtab.len() as u64),
            ])
            .collect();
        let strings = count - 2;
        for (name, kind, offset, size) in all {
            let mut h = vec![0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[40..44].copy_from_slice(&(strings as u32).to_le_bytes());
            h[24..32].copy_from_slice(&offset.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            image.extend(h);
        }
        image
    }

    #[test]
    fn cubin_variables_are_state_and_kernel_banks_are_not() {
        let code = [(".text.k", 1, 64), (".nv.constant0.k", 1, 32), (".nv.constant3", 1, 16)];
        // Section indices count from 1 (0 is the null section).
        let literal = elf_image(&code, &[(2, 1, 8)]);
        assert_eq!(of(&literal), variables(&[]), "an object in a kernel's own bank is not state");
        let constant = elf_image(&code, &[(2, 1, 8), (3, 1, 16)]);
        assert_eq!(of(&constant), variables(&[("v1", false)]), "a __constant__ variable");
        let section_symbol = elf_image(&code, &[(3, 3, 0)]);
        assert_eq!(of(&section_symbol), variables(&[]), "a section symbol is not a variable");
        let global = [(".text.k", 1, 64), (".nv.global", 8, 4)];
        assert_eq!(of(&elf_image(&global, &[(2, 1, 4)])), variables(&[("v0", true)]), "a __device__ variable");
        assert_eq!(of(&elf_image(&global, &[])), State::Unknown, "global memory without a symbol");
    }
}
