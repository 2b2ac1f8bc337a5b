//! A bounded reader of ELF headers: the program headers (`PT_INTERP`,
//! `PT_NOTE`, `PT_DYNAMIC`), the section names and a shared object's own
//! name (`DT_SONAME`), no more than [`MAX_HEADERS`] of each and
//! [`MAX_TABLE`] bytes of any note segment, dynamic section or name
//! table. Every offset and length is checked; what does not add up is
//! "cannot tell".

use crate::Bypass;

/// Bytes at an offset of a file (or of memory, in tests).
pub trait Source {
    /// Fill `buf` from `offset` on; returns how many bytes were read
    /// (fewer at the end of the file, or on an error).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize;
}

impl Source for [u8] {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        let Some(rest) = usize::try_from(offset).ok().and_then(|o| self.get(o..)) else {
            return 0;
        };
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        n
    }
}

/// Program or section headers examined at most.
const MAX_HEADERS: usize = 4096;
/// Bytes of one note segment or of the section name table read at most.
const MAX_TABLE: usize = 1 << 20;

const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_INTERP: u32 = 3;
const PT_NOTE: u32 = 4;
const DT_NULL: u64 = 0;
const DT_STRTAB: u64 = 5;
const DT_SONAME: u64 = 14;
/// Bytes of a shared object's name read at most.
const MAX_NAME: u64 = 256;
/// The Go toolchain's build-ID note: name `Go`, type 4.
const NT_GO_BUILDID: u32 = 4;
/// The sections that mark a Go program.
const GO_SECTIONS: [&[u8]; 2] = [b".note.go.buildid", b".go.buildinfo"];

/// The layout of one ELF file: 32 or 64 bits, byte order.
#[derive(Clone, Copy)]
struct Layout {
    wide: bool,
    little: bool,
}

impl Layout {
    /// `N` bytes at `at` of `b`.
    fn bytes<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
        b.get(at..at.checked_add(N)?)?.try_into().ok()
    }

    /// An `N`-byte unsigned number at `at` of `b`, in the file's byte
    /// order.
    fn uint<const N: usize>(self, b: &[u8], at: usize) -> Option<u64> {
        let v = Self::bytes::<N>(b, at)?;
        let push = |acc: u64, byte: &u8| (acc << 8) | u64::from(*byte);
        Some(if self.little {
            v.iter().rev().fold(0, push)
        } else {
            v.iter().fold(0, push)
        })
    }

    fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        self.uint::<2>(b, at).and_then(|v| u16::try_from(v).ok())
    }

    fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        self.uint::<4>(b, at).and_then(|v| u32::try_from(v).ok())
    }

    /// An address or offset: 4 bytes in a 32-bit file, 8 in a 64-bit one.
    fn word(self, b: &[u8], at: usize) -> Option<u64> {
        if self.wide {
            self.uint::<8>(b, at)
        } else {
            self.uint::<4>(b, at)
        }
    }

    /// A header field at its 32-bit or 64-bit offset.
    fn field(self, b: &[u8], at32: usize, at64: usize) -> Option<u64> {
        self.word(b, if self.wide { at64 } else { at32 })
    }
}

/// `len` bytes at `offset`, when the file has them all and `len` is at
/// most `max`.
fn read(src: &(impl Source + ?Sized), offset: u64, len: u64, max: usize) -> Option<Vec<u8>> {
    let len = usize::try_from(len).ok().filter(|&l| l <= max)?;
    let mut buf = vec![0; len];
    (src.read_at(offset, &mut buf) == len).then_some(buf)
}

/// A table of `count` entries of `size` bytes at `offset` (at most
/// [`MAX_HEADERS`] entries read), each at least `min` bytes.
fn table(
    src: &(impl Source + ?Sized),
    offset: u64,
    size: u16,
    count: u16,
    min: usize,
) -> Option<Vec<Vec<u8>>> {
    let size = usize::from(size);
    if size < min {
        return None;
    }
    let count = usize::from(count).min(MAX_HEADERS);
    let all = read(src, offset, (size * count) as u64, size * MAX_HEADERS)?;
    Some(all.chunks_exact(size).map(<[u8]>::to_vec).collect())
}

/// Whether a note segment holds Go's build-ID note.
fn has_go_note(l: Layout, notes: &[u8]) -> bool {
    let mut at = 0usize;
    let align4 = |n: u32| (n as usize).checked_next_multiple_of(4);
    while let (Some(namesz), Some(descsz), Some(kind)) =
        (l.u32(notes, at), l.u32(notes, at + 4), l.u32(notes, at + 8))
    {
        let name_at = at + 12;
        let Some(name) = name_at
            .checked_add(namesz as usize)
            .and_then(|end| notes.get(name_at..end))
        else {
            return false;
        };
        let end = name.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
        if kind == NT_GO_BUILDID && &name[..end] == b"Go" {
            return true;
        }
        let next = align4(namesz)
            .zip(align4(descsz))
            .and_then(|(n, d)| name_at.checked_add(n)?.checked_add(d));
        match next {
            Some(n) if n > at => at = n,
            _ => return false,
        }
    }
    false
}

/// Whether a section is named as one of Go's.
fn has_go_section(l: Layout, sections: &[Vec<u8>], names: &[u8]) -> bool {
    sections.iter().any(|s| {
        let Some(start) = l.u32(s, 0).and_then(|n| usize::try_from(n).ok()) else {
            return false;
        };
        let Some(rest) = names.get(start..) else {
            return false;
        };
        let name = &rest[..rest.iter().position(|&c| c == 0).unwrap_or(rest.len())];
        GO_SECTIONS.contains(&name)
    })
}

/// The name a shared object gives itself (`DT_SONAME`), read through its
/// dynamic section and the string table its loaded segments map.
fn soname(src: &(impl Source + ?Sized), l: Layout, phdrs: &[Vec<u8>]) -> Option<Vec<u8>> {
    let of_type = |t| phdrs.iter().filter(move |ph| l.u32(ph, 0) == Some(t));
    let dynamic = of_type(PT_DYNAMIC).next()?;
    let entries = read(
        src,
        l.field(dynamic, 4, 8)?,
        l.field(dynamic, 16, 32)?,
        MAX_TABLE,
    )?;
    let (mut strtab, mut name) = (None, None);
    let size = if l.wide { 16 } else { 8 };
    for e in entries.chunks_exact(size) {
        let (tag, value) = (l.word(e, 0)?, l.word(e, size / 2)?);
        match tag {
            DT_NULL => break,
            DT_STRTAB => strtab = Some(value),
            DT_SONAME => name = Some(value),
            _ => {}
        }
    }
    let (strtab, name) = (strtab?, name?);
    // The string table is given as an address: the file offset is where
    // the segment that loads that address comes from.
    let offset = of_type(PT_LOAD).find_map(|ph| {
        let (offset, vaddr) = (l.field(ph, 4, 8)?, l.field(ph, 8, 16)?);
        let filesz = l.field(ph, 16, 32)?;
        let within = strtab.checked_sub(vaddr).filter(|&d| d < filesz)?;
        offset.checked_add(within)?.checked_add(name)
    })?;
    let mut buf = vec![0u8; MAX_NAME as usize];
    let n = src.read_at(offset, &mut buf);
    let end = buf[..n].iter().position(|&c| c == 0)?;
    buf.truncate(end);
    Some(buf)
}

/// Whether a shared object's name is a dynamic loader's
/// (`ld-linux-x86-64.so.2`, `ld64.so.2`, `ld-musl-x86_64.so.1`, ...).
fn is_loader_name(name: &[u8]) -> bool {
    [&b"ld-"[..], b"ld.so", b"ld64.so"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// Whether the ELF program in `src` bypasses an LD_PRELOAD library: a Go
/// program, or one without a program interpreter. `None` when it does
/// not, and when `src` is not an ELF executable or its headers do not add
/// up (nothing to tell).
pub fn inspect(src: &(impl Source + ?Sized)) -> Option<Bypass> {
    let ehdr = read(src, 0, 64, 64).or_else(|| read(src, 0, 52, 52))?;
    if !ehdr.starts_with(b"\x7fELF") {
        return None;
    }
    let l = Layout {
        wide: match ehdr.get(4)? {
            1 => false,
            2 => true,
            _ => return None,
        },
        little: match ehdr.get(5)? {
            1 => true,
            2 => false,
            _ => return None,
        },
    };
    // ET_EXEC or ET_DYN (a PIE): something the kernel executes.
    if !matches!(l.u16(&ehdr, 16)?, 2 | 3) {
        return None;
    }
    let at = |a32, a64| if l.wide { a64 } else { a32 };
    let phoff = l.field(&ehdr, 28, 32)?;
    let shoff = l.field(&ehdr, 32, 40)?;
    let phentsize = l.u16(&ehdr, at(42, 54))?;
    let phnum = l.u16(&ehdr, at(44, 56))?;
    let shentsize = l.u16(&ehdr, at(46, 58))?;
    let shnum = l.u16(&ehdr, at(48, 60))?;
    let shstrndx = l.u16(&ehdr, at(50, 62))?;
    if phnum == 0 {
        return None;
    }
    let phdrs = table(src, phoff, phentsize, phnum, at(32, 56))?;
    let mut interp = false;
    let mut go = false;
    for ph in &phdrs {
        match l.u32(ph, 0)? {
            PT_INTERP => interp = true,
            PT_NOTE => {
                let offset = l.field(ph, 4, 8)?;
                let size = l.field(ph, 16, 32)?;
                go |= read(src, offset, size, MAX_TABLE).is_some_and(|n| has_go_note(l, &n));
            }
            _ => {}
        }
    }
    // The section names, when there are sections (a stripped program may
    // have none; its note segment still tells).
    if !go && shnum > 0 && shoff > 0 {
        let sections = table(src, shoff, shentsize, shnum, at(40, 64));
        let names = sections.as_ref().and_then(|s| {
            let strtab = s.get(usize::from(shstrndx))?;
            read(
                src,
                l.field(strtab, 16, 24)?,
                l.field(strtab, 20, 32)?,
                MAX_TABLE,
            )
        });
        if let (Some(s), Some(n)) = (&sections, &names) {
            go = has_go_section(l, s, n);
        }
    }
    if go {
        Some(Bypass::Go)
    } else if interp {
        None
    } else if soname(src, l, &phdrs).is_some_and(|n| is_loader_name(&n)) {
        // The dynamic loader run as a program (`ld.so [--library-path
        // DIR] PROGRAM`, as bundled and relocated programs are started):
        // it loads LD_PRELOAD into the program it runs.
        None
    } else {
        Some(Bypass::Static)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64-bit little-endian executable with program headers of the
    /// given types (a note segment holds `note`), and no sections.
    fn elf64(types: &[u32], note: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; 64];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[16..18].copy_from_slice(&2u16.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        b[56..58].copy_from_slice(&(types.len() as u16).to_le_bytes());
        let note_at = 64 + 56 * types.len();
        for &t in types {
            let mut ph = vec![0u8; 56];
            ph[..4].copy_from_slice(&t.to_le_bytes());
            ph[8..16].copy_from_slice(&(note_at as u64).to_le_bytes());
            ph[32..40].copy_from_slice(&(note.len() as u64).to_le_bytes());
            b.extend_from_slice(&ph);
        }
        b.extend_from_slice(note);
        b
    }

    fn go_note() -> Vec<u8> {
        let mut n = Vec::new();
        // A GNU build-ID note first, then Go's.
        for (name, kind) in [(&b"GNU\0"[..], 3u32), (&b"Go\0\0"[..], NT_GO_BUILDID)] {
            n.extend_from_slice(&(name.len() as u32).to_le_bytes());
            n.extend_from_slice(&8u32.to_le_bytes());
            n.extend_from_slice(&kind.to_le_bytes());
            n.extend_from_slice(name);
            n.extend_from_slice(b"12345678");
        }
        n
    }

    #[test]
    fn the_program_headers_tell_static_dynamic_and_go() {
        assert_eq!(inspect(&elf64(&[1, PT_INTERP], b"")[..]), None);
        assert_eq!(inspect(&elf64(&[1], b"")[..]), Some(Bypass::Static));
        let go = go_note();
        assert_eq!(
            inspect(&elf64(&[PT_INTERP, PT_NOTE], &go)[..]),
            Some(Bypass::Go)
        );
        assert_eq!(inspect(&elf64(&[PT_NOTE], &go)[..]), Some(Bypass::Go));
        // Another note only: what the interpreter says.
        assert_eq!(inspect(&elf64(&[PT_INTERP, PT_NOTE], &go[..20])[..]), None);
    }

    /// A 64-bit little-endian shared object without a program
    /// interpreter that names itself `name` (`DT_SONAME`), its string
    /// table at an address that a loaded segment maps from another offset.
    fn shared_object(name: &[u8]) -> Vec<u8> {
        const BASE: u64 = 0x1000;
        let mut b = elf64(&[PT_LOAD, PT_DYNAMIC], b"");
        b[16..18].copy_from_slice(&3u16.to_le_bytes()); // ET_DYN
        let dyn_at = b.len() as u64;
        let str_at = dyn_at + 3 * 16;
        let len = str_at + 1 + name.len() as u64 + 1;
        let ph = |i: usize| 64 + 56 * i;
        // PT_LOAD: the whole file at BASE.
        b[ph(0) + 8..ph(0) + 16].copy_from_slice(&0u64.to_le_bytes());
        b[ph(0) + 16..ph(0) + 24].copy_from_slice(&BASE.to_le_bytes());
        b[ph(0) + 32..ph(0) + 40].copy_from_slice(&len.to_le_bytes());
        // PT_DYNAMIC: three entries.
        b[ph(1) + 8..ph(1) + 16].copy_from_slice(&dyn_at.to_le_bytes());
        b[ph(1) + 32..ph(1) + 40].copy_from_slice(&48u64.to_le_bytes());
        for (tag, value) in [(DT_STRTAB, BASE + str_at), (DT_SONAME, 1), (DT_NULL, 0)] {
            b.extend_from_slice(&tag.to_le_bytes());
            b.extend_from_slice(&value.to_le_bytes());
        }
        b.push(0);
        b.extend_from_slice(name);
        b.push(0);
        b
    }

    #[test]
    fn the_dynamic_loader_run_as_a_program_is_reached() {
        for loader in [
            &b"ld-linux-x86-64.so.2"[..],
            b"ld64.so.2",
            b"ld-musl-x86_64.so.1",
        ] {
            assert_eq!(inspect(&shared_object(loader)[..]), None);
        }
        // A static-pie program or any other object without an
        // interpreter stays out of reach.
        assert_eq!(
            inspect(&shared_object(b"libstatic.so")[..]),
            Some(Bypass::Static)
        );
        let mut unnamed = shared_object(b"ld-linux-x86-64.so.2");
        let at = unnamed.len() - 22;
        unnamed[at..].fill(0);
        assert_eq!(inspect(&unnamed[..]), Some(Bypass::Static));
        // The system's own loader, where it is where x86-64 keeps it.
        let system = std::path::Path::new("/lib64/ld-linux-x86-64.so.2");
        if let Ok(bytes) = std::fs::read(system) {
            assert_eq!(inspect(&bytes[..]), None, "{}", system.display());
        }
    }

    #[test]
    fn what_is_not_an_elf_executable_is_not_judged() {
        assert_eq!(inspect(&b"#!/bin/sh\n"[..]), None);
        assert_eq!(inspect(&b""[..]), None);
        let mut obj = elf64(&[1], b"");
        obj[16] = 1; // ET_REL
        assert_eq!(inspect(&obj[..]), None);
    }

    /// Every prefix of a real program and of the made-up ones, and every
    /// byte of their headers set to extremes: an answer, never a panic.
    #[test]
    fn truncated_and_corrupted_headers_never_panic() {
        let mut files = vec![
            elf64(&[PT_INTERP, PT_NOTE], &go_note()),
            shared_object(b"ld-linux-x86-64.so.2"),
        ];
        if let Ok(sh) = std::fs::read("/bin/sh") {
            files.push(sh);
        }
        for f in &files {
            for n in 0..f.len().min(4096) {
                let _ = inspect(&f[..n]);
            }
            for i in 0..f.len().min(256) {
                for v in [0u8, 1, 0x7f, 0xff] {
                    let mut g = f.clone();
                    g[i] = v;
                    let _ = inspect(&g[..]);
                }
            }
        }
        assert_eq!(inspect(&files[0][..]), Some(Bypass::Go));
    }
}
