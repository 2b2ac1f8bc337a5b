//! Threads appending small records to one file while other threads sync
//! it, sync the pool and read it: appends into the end's page gather in
//! memory (`file` mode) and are logged by whichever sync or write comes
//! first. The checks:
//! - every record a reader sees below the end it read is whole (its bytes
//!   are its writer's, never zeros or another record's);
//! - the final file holds every record once, each thread's in order;
//! - the unmount's sync logs what is still gathered: the pool is clean,
//!   and a remount reads the same bytes (memory and media agree there).

mod common;

use manyfs::{Fs, MountOptions, OpenOptions};
use std::sync::atomic::{AtomicBool, Ordering};

/// Odd, so that records straddle page boundaries at every offset.
const RECORD: usize = 37;
const WRITERS: u8 = 3;
const RECORDS: u32 = 3000;

fn record(writer: u8, seq: u32) -> [u8; RECORD] {
    let mut r = [0u8; RECORD];
    r[0] = writer + 1;
    r[1..5].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in r[5..].iter_mut().enumerate() {
        *b = (seq as u8).wrapping_mul(31).wrapping_add(i as u8) | 1;
    }
    r
}

/// Checks every whole record of `bytes`; returns them as (writer, seq).
fn parse(bytes: &[u8]) -> Vec<(u8, u32)> {
    bytes
        .chunks_exact(RECORD)
        .enumerate()
        .map(|(i, r)| {
            let writer = r[0].wrapping_sub(1);
            let seq = u32::from_le_bytes(r[1..5].try_into().unwrap());
            assert!(
                writer < WRITERS && r == record(writer, seq),
                "record {i} at byte {} is not one writer's: {r:?}",
                i * RECORD
            );
            (writer, seq)
        })
        .collect()
}

fn check_final(bytes: &[u8]) {
    assert_eq!(bytes.len(), RECORD * WRITERS as usize * RECORDS as usize);
    let mut next = [0u32; WRITERS as usize];
    for (writer, seq) in parse(bytes) {
        assert_eq!(seq, next[writer as usize], "writer {writer} out of order");
        next[writer as usize] += 1;
    }
}

#[test]
fn appends_racing_syncs_and_reads_keep_every_record() {
    let (_dir, pool, fs) = common::fresh(64 << 20);
    let f = OpenOptions::new()
        .read(true)
        .append(true)
        .create(true)
        .open(&fs, "/log")
        .unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let f = &f;
                s.spawn(move || {
                    for seq in 0..RECORDS {
                        f.append(&record(w, seq)).unwrap();
                    }
                })
            })
            .collect();
        s.spawn(|| {
            let mut n = 0u32;
            while !done.load(Ordering::Acquire) {
                if n.is_multiple_of(3) {
                    fs.sync().unwrap();
                } else {
                    f.sync_data().unwrap();
                }
                n += 1;
                std::thread::yield_now();
            }
        });
        s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                let len = f.metadata().unwrap().size as usize;
                let mut buf = vec![0u8; len - len % RECORD];
                let got = f.read_at(&mut buf, 0).unwrap();
                assert_eq!(got, buf.len(), "a read below the end it saw came short");
                parse(&buf);
            }
        });
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });
    check_final(&fs.read("/log").unwrap());
    // Unmounted straight away: its sync must log what is still gathered.
    drop(f);
    fs.unmount().unwrap();
    let report = manyfs::fsck::check(&pool).unwrap();
    assert!(report.is_clean(), "{:?}", report.errors);
    let fs = Fs::mount(&pool, &MountOptions::default()).unwrap();
    check_final(&fs.read("/log").unwrap());
    let diffs = manyfs::fsck::verify(&fs).unwrap();
    assert!(diffs.is_empty(), "{diffs:?}");
}
