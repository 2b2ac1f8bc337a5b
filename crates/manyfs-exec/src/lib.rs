//! What `manyfs run` execs, and whether its LD_PRELOAD library can reach
//! it. The library serves a program's file calls by interposing libc's
//! functions; two kinds of program never call them:
//!
//! - a **statically linked** program: no program interpreter
//!   (`PT_INTERP`), so the dynamic linker, which loads `LD_PRELOAD`,
//!   never runs (the dynamic linker itself run as a program, `ld.so
//!   PROGRAM`, has none either, but it loads the library into the
//!   program it starts: it is known by its own name, `DT_SONAME`);
//! - a **Go** program: the Go runtime makes its own `syscall`
//!   instructions, even when dynamically linked (cgo). It is known by its
//!   build-ID note (`Go`, type 4: the `.note.go.buildid` section) or its
//!   `.go.buildinfo` section.
//!
//! [`bypass`] reads a file's ELF headers, or the interpreter its `#!`
//! line names, with bounded reads: a truncated or hostile file, or one
//! that cannot be read, is never refused (its exec then says what it is),
//! and nothing here panics on any input. [`find_program`] finds a program
//! on `PATH` as `execvp` does.

#![deny(missing_docs)]

mod elf;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub use elf::{Source, inspect};

/// Why a program's file calls bypass an LD_PRELOAD library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bypass {
    /// Statically linked: no program interpreter loads the library.
    Static,
    /// A Go program: it makes its own system calls.
    Go,
}

impl std::fmt::Display for Bypass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Bypass::Static => "is statically linked (no program interpreter to load LD_PRELOAD)",
            Bypass::Go => "is a Go program (it makes its own system calls, not libc's)",
        })
    }
}

/// A program the library cannot reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreachable {
    /// The executable that bypasses it: the program, or the interpreter
    /// its `#!` line (or its interpreter's) names.
    pub binary: PathBuf,
    /// Why.
    pub why: Bypass,
}

/// How many `#!` interpreters are followed (Linux's limit of nested
/// interpreters, `BINPRM_MAX_RECURSION`, is 4).
const MAX_SCRIPTS: usize = 4;
/// The bytes of a `#!` line read (Linux reads 256).
pub const SHEBANG_LEN: usize = 256;

impl Source for std::fs::File {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> usize {
        let mut done = 0;
        while done < buf.len() {
            match FileExt::read_at(self, &mut buf[done..], offset.saturating_add(done as u64)) {
                Ok(0) | Err(_) => break,
                Ok(n) => done += n,
            }
        }
        done
    }
}

/// Whether `program` (a path) bypasses an LD_PRELOAD library, and which
/// executable makes it: the program itself, or the interpreter a `#!`
/// script names (followed through scripts as the kernel follows them).
/// `None` when it is reached (a dynamically linked ELF program that is not
/// Go), and whenever that cannot be told (a file that cannot be read, is
/// neither ELF nor a script, or is malformed): its exec decides.
pub fn bypass(program: &Path) -> Option<Unreachable> {
    let mut path = program.to_path_buf();
    for _ in 0..=MAX_SCRIPTS {
        let file = std::fs::File::open(&path).ok()?;
        if let Some(why) = inspect(&file) {
            return Some(Unreachable { binary: path, why });
        }
        let mut head = [0u8; SHEBANG_LEN];
        let n = Source::read_at(&file, 0, &mut head);
        path = interpreter(&head[..n])?;
    }
    None
}

/// The interpreter a `#!` line names: the first word after `#!`.
fn interpreter(head: &[u8]) -> Option<PathBuf> {
    shebang(head).map(|s| s.interpreter)
}

/// A script's `#!` line, split as the kernel splits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shebang {
    /// The program that runs the script: the first word after `#!`.
    pub interpreter: PathBuf,
    /// The rest of the line, one argument (spaces inside it kept, those
    /// around it dropped), if any.
    pub arg: Option<std::ffi::OsString>,
}

/// The `#!` line at the start of `head` (the file's first
/// [`SHEBANG_LEN`] bytes, or all of a shorter file), as Linux's
/// `binfmt_script` reads it: spaces and tabs after `#!` skipped, the
/// interpreter up to the next space or tab, the rest of the line with
/// the spaces and tabs around it dropped as one argument. `None` when
/// `head` is not a `#!` line or names no interpreter.
pub fn shebang(head: &[u8]) -> Option<Shebang> {
    let blank = |c: &u8| *c == b' ' || *c == b'\t';
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&c| c == b'\n').unwrap_or(line.len())];
    let start = line.iter().position(|c| !blank(c))?;
    let end = line.iter().rposition(|c| !blank(c))? + 1;
    let line = &line[start..end];
    let word_end = line.iter().position(blank).unwrap_or(line.len());
    let rest = &line[word_end..];
    let arg = rest
        .iter()
        .position(|c| !blank(c))
        .map(|i| OsStr::from_bytes(&rest[i..]).to_os_string());
    Some(Shebang {
        interpreter: PathBuf::from(OsStr::from_bytes(&line[..word_end])),
        arg,
    })
}

/// The file `execvp` would run for `program`: itself when it has a `/`,
/// else the first executable regular file named so in a directory of
/// `path` (`PATH`'s value; glibc's default `/bin:/usr/bin` when unset; an
/// empty entry is the working directory). `None` when there is none.
pub fn find_program(program: &OsStr, path: Option<&OsStr>) -> Option<PathBuf> {
    let name = program.as_bytes();
    if name.is_empty() {
        return None;
    }
    if name.contains(&b'/') {
        return Some(PathBuf::from(program));
    }
    let path = path.map_or(&b"/bin:/usr/bin"[..], OsStr::as_bytes);
    path.split(|&c| c == b':').find_map(|dir| {
        let dir = if dir.is_empty() { &b"."[..] } else { dir };
        let candidate = Path::new(OsStr::from_bytes(dir)).join(program);
        let meta = std::fs::metadata(&candidate).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(candidate)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interpreter_is_the_first_word_of_the_shebang_line() {
        assert_eq!(interpreter(b"#!/bin/sh\necho"), Some("/bin/sh".into()));
        assert_eq!(
            interpreter(b"#! \t/usr/bin/env python3 -u\n"),
            Some("/usr/bin/env".into())
        );
        assert_eq!(interpreter(b"#!"), None);
        assert_eq!(interpreter(b"#!   \n/bin/sh"), None);
        assert_eq!(interpreter(b"echo hi"), None);
    }

    #[test]
    fn the_rest_of_the_shebang_line_is_one_argument() {
        let split = |head: &[u8]| {
            shebang(head).map(|s| {
                let arg = s.arg.map(|a| a.into_string().unwrap());
                (s.interpreter.into_os_string().into_string().unwrap(), arg)
            })
        };
        let sh = |arg: Option<&str>| Some(("/bin/sh".to_string(), arg.map(str::to_string)));
        assert_eq!(split(b"#!/bin/sh\necho -x"), sh(None));
        assert_eq!(split(b"#!/bin/sh \t \n"), sh(None));
        assert_eq!(split(b"#! /bin/sh -e\n"), sh(Some("-e")));
        assert_eq!(split(b"#!/bin/sh  -e -x \t\n"), sh(Some("-e -x")));
        assert_eq!(split(b"#!/bin/sh -e"), sh(Some("-e")), "no newline");
        assert_eq!(split(b"#!/bin/sh\t-e\r\n"), sh(Some("-e\r")));
        assert_eq!(split(b"#!\n/bin/sh"), None);
        assert_eq!(split(b"#! \t"), None);
        assert_eq!(split(b"\x7fELF"), None);
    }

    #[test]
    fn programs_are_found_on_path_as_execvp_finds_them() {
        let sh = find_program(
            OsStr::new("sh"),
            Some(OsStr::new("/nonexistent::/bin:/usr/bin")),
        );
        assert_eq!(sh, Some(PathBuf::from("/bin/sh")));
        assert_eq!(
            find_program(OsStr::new("./x/y"), None),
            Some(PathBuf::from("./x/y"))
        );
        assert_eq!(find_program(OsStr::new("no-such-program-here"), None), None);
        assert_eq!(find_program(OsStr::new(""), None), None);
        // A directory is not a program.
        assert_eq!(find_program(OsStr::new("bin"), Some(OsStr::new("/"))), None);
    }

    #[test]
    fn a_dynamic_program_and_a_script_are_reached() {
        assert_eq!(bypass(Path::new("/bin/sh")), None);
        let dir = std::env::temp_dir().join(format!("manyfs-exec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("s");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        assert_eq!(bypass(&script), None);
        // A script whose interpreter is a script whose interpreter is itself:
        // followed a bounded number of times.
        let looped = dir.join("loop");
        std::fs::write(&looped, format!("#!{}\n", looped.display())).unwrap();
        assert_eq!(bypass(&looped), None);
        assert_eq!(bypass(&dir.join("missing")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
