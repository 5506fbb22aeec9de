//! The code images the driver reports loading, read as text: an ELF64 cubin's sections and
//! strings, and PTX's lines with the depth of braces they stand at.

/// A cubin's section, as its header says.
#[derive(Clone, Copy, Debug)]
pub struct Section<'a> {
    pub name: &'a str,
    /// `sh_type` (2: a symbol table).
    pub kind: u32,
    pub offset: usize,
    pub size: usize,
    /// `sh_link`: for a symbol table, the index of its string table.
    pub link: usize,
}

/// An ELF64 little-endian cubin: its `e_flags` and its sections. None for anything else, or a
/// malformed one.
pub fn cubin(image: &[u8]) -> Option<(u32, Vec<Section<'_>>)> {
    if !image.starts_with(b"\x7fELF") || image.get(4) != Some(&2) || image.get(5) != Some(&1) {
        return None;
    }
    let shoff = u64_at(image, 0x28)? as usize;
    let shentsize = usize::from(u16::from_le_bytes(image.get(0x3a..0x3c)?.try_into().ok()?));
    let shnum = usize::from(u16::from_le_bytes(image.get(0x3c..0x3e)?.try_into().ok()?));
    let shstrndx = usize::from(u16::from_le_bytes(image.get(0x3e..0x40)?.try_into().ok()?));
    if shentsize < 64 {
        return None;
    }
    let header = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let names = u64_at(image, header(shstrndx)? + 24)? as usize;
    let sections = (0..shnum)
        .map(|i| {
            let at = header(i)?;
            Some(Section {
                name: string_at(image, names, u32_at(image, at)? as usize)?,
                kind: u32_at(image, at + 4)?,
                offset: u64_at(image, at + 24)? as usize,
                size: u64_at(image, at + 32)? as usize,
                link: u32_at(image, at + 40)? as usize,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((u32_at(image, 0x30)?, sections))
}

impl Section<'_> {
    /// The section's bytes in `image` (None for one that holds none there, `.nv.global`'s).
    pub fn bytes<'i>(&self, image: &'i [u8]) -> Option<&'i [u8]> {
        image.get(self.offset..self.offset.checked_add(self.size)?)
    }
}

/// The NUL-terminated string at `offset` of the string table at `table`.
pub fn string_at(image: &[u8], table: usize, offset: usize) -> Option<&str> {
    let bytes = image.get(table.checked_add(offset)?..)?;
    std::str::from_utf8(&bytes[..bytes.iter().position(|&b| b == 0)?]).ok()
}

/// PTX text: each line without its comment, and the depth of braces it starts at (0 outside
/// every function). None for an image that is not PTX.
pub fn ptx(image: &[u8]) -> Option<Vec<(i32, String)>> {
    let text = std::str::from_utf8(image.split(|&b| b == 0).next().unwrap_or_default()).ok()?;
    if !text.contains(".version") && !text.contains(".entry") {
        return None;
    }
    let mut depth = 0;
    let lines = text
        .lines()
        .map(|line| {
            let code = line.split("//").next().unwrap_or_default();
            let at = depth;
            depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
            (at, code.to_string())
        })
        .collect();
    Some(lines)
}

/// The symbol of the kernel a PTX line outside every function (depth 0) declares with
/// `.entry`, if it declares one.
pub fn ptx_entry(code: &str) -> Option<&str> {
    code.split(".entry").nth(1)?.split(['(', ' ', '\t']).find(|w| !w.is_empty())
}

fn u32_at(image: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(image.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(image: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(image.get(at..at + 8)?.try_into().ok()?))
}
