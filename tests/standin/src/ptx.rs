//! Kernels for the stand-in, declared the way real programs declare them: in PTX.
//!
//! A module image is read as PTX text; each `.entry name( .param ... )` declares a kernel
//! whose parameter layout follows the PTX rules the real driver applies (each parameter
//! aligned to its `.align` or natural size). Nothing is compiled or run: an ELF cubin (whose
//! machine code a Compute Sanitizer library reads) declares its kernels in PTX carried in a
//! section of its own, `.standin.ptx` ([`cubin`]).

/// One kernel parameter: its byte offset and size in the parameter buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    pub offset: usize,
    pub size: usize,
}

/// One `.entry`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub params: Vec<Param>,
}

/// Every `.entry` of a PTX text.
pub fn entries(ptx: &str) -> Vec<Entry> {
    let mut found = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry") {
        rest = &rest[at + ".entry".len()..];
        let Some(open) = rest.find('(') else { break };
        let name = rest[..open].trim().to_string();
        let Some(close) = rest[open..].find(')') else { break };
        let params = layout(&rest[open + 1..open + close]);
        found.push(Entry { name, params });
        rest = &rest[open + close..];
    }
    found
}

/// Offsets and sizes of a comma-separated `.param` list.
fn layout(list: &str) -> Vec<Param> {
    let mut params = Vec::new();
    let mut offset = 0usize;
    for decl in list.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let words: Vec<&str> = decl.split_whitespace().collect();
        let mut align = None;
        let mut size = 0usize;
        // After `.ptr`, `.align` is the pointee's alignment, not the parameter's.
        let mut pointer = false;
        let mut i = 0;
        while i < words.len() {
            match words[i] {
                ".align" => {
                    if !pointer {
                        align = words.get(i + 1).and_then(|a| a.parse().ok());
                    }
                    i += 1;
                }
                ".ptr" => pointer = true,
                ".param" | ".global" | ".const" | ".local" | ".shared" => {}
                ty if ty.starts_with('.') => {
                    size = scalar_size(ty);
                }
                name => {
                    if let (Some(lb), Some(rb)) = (name.find('['), name.find(']')) {
                        let count: usize = name[lb + 1..rb].parse().unwrap_or(1);
                        size *= count;
                    }
                }
            }
            i += 1;
        }
        let align = align.unwrap_or(size.max(1)).max(1);
        offset = offset.div_ceil(align) * align;
        params.push(Param { offset, size });
        offset += size;
    }
    params
}

/// Every variable declared `.global` or `.const` outside the functions (`.visible .global
/// .align 4 .u32 name[8];`), with its size in bytes.
pub fn variables(ptx: &str) -> Vec<(String, usize)> {
    let mut found = Vec::new();
    let mut depth = 0i32;
    for line in ptx.lines() {
        if depth == 0 && line.split_whitespace().any(|w| w == ".global" || w == ".const") {
            let declared = line.split(['=', ';']).next().unwrap_or_default();
            let words: Vec<&str> = declared.split_whitespace().collect();
            let element = words.iter().rev().skip(1).find(|w| w.starts_with('.')).map_or(4, |ty| scalar_size(ty));
            if let Some(last) = words.last() {
                let (name, count) = match last.split_once('[') {
                    Some((name, count)) => (name, count.trim_end_matches(']').parse().unwrap_or(1)),
                    None => (*last, 1),
                };
                found.push((name.to_string(), element * count));
            }
        }
        depth += line.matches('{').count() as i32 - line.matches('}').count() as i32;
    }
    found
}

/// The size of the ELF64 cubin at the start of `head` (its first 64 bytes at least), its
/// section headers last: None for anything else.
pub fn cubin_size(head: &[u8]) -> Option<usize> {
    if !head.starts_with(b"\x7fELF") || head.len() < 64 || head[4] != 2 {
        return None;
    }
    let shoff = u64::from_le_bytes(head[0x28..0x30].try_into().ok()?) as usize;
    let shentsize = usize::from(u16::from_le_bytes(head[0x3a..0x3c].try_into().ok()?));
    let shnum = usize::from(u16::from_le_bytes(head[0x3c..0x3e].try_into().ok()?));
    shoff.checked_add(shentsize.checked_mul(shnum)?)
}

/// The PTX an ELF64 cubin `image` carries in its section `.standin.ptx`.
pub fn cubin(image: &[u8]) -> Option<String> {
    let at = |offset: usize, len: usize| image.get(offset..offset.checked_add(len)?);
    let u64_at = |offset: usize| Some(u64::from_le_bytes(at(offset, 8)?.try_into().ok()?) as usize);
    let u16_at = |offset: usize| Some(usize::from(u16::from_le_bytes(at(offset, 2)?.try_into().ok()?)));
    let (shoff, shentsize, shnum, shstrndx) = (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?, u16_at(0x3e)?);
    let header = |i: usize| shoff + i * shentsize;
    let names = u64_at(header(shstrndx) + 24)?;
    (0..shnum).find_map(|i| {
        let name_at = names + u32::from_le_bytes(at(header(i), 4)?.try_into().ok()?) as usize;
        let name = image.get(name_at..)?.split(|&b| b == 0).next()?;
        if name != b".standin.ptx" {
            return None;
        }
        let bytes = at(u64_at(header(i) + 24)?, u64_at(header(i) + 32)?)?;
        String::from_utf8(bytes.to_vec()).ok()
    })
}

fn scalar_size(ty: &str) -> usize {
    let digits: String = ty.chars().filter(char::is_ascii_digit).collect();
    digits.parse::<usize>().map(|bits| bits.max(8) / 8).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_layouts_follow_ptx_alignment() {
        let ptx = r#"
            .visible .entry _Z6kernelPKfPfi(
                .param .u64 _Z6kernelPKfPfi_param_0,
                .param .u64 .ptr .global .align 4 _Z6kernelPKfPfi_param_1,
                .param .u32 _Z6kernelPKfPfi_param_2
            )
            { ret; }
            .visible .entry other(
                .param .u32 other_param_0,
                .param .align 8 .b8 other_param_1[24],
                .param .u32 other_param_2,
                .param .u64 .ptr .global .align 4 other_param_3
            )
        "#;
        let found = entries(ptx);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].name, "_Z6kernelPKfPfi");
        assert_eq!(
            found[0].params,
            vec![Param { offset: 0, size: 8 }, Param { offset: 8, size: 8 }, Param { offset: 16, size: 4 }]
        );
        assert_eq!(
            found[1].params,
            vec![
                Param { offset: 0, size: 4 },
                Param { offset: 8, size: 24 },
                Param { offset: 32, size: 4 },
                Param { offset: 40, size: 8 },
            ]
        );
    }
}
