//! Decoding arbitrary slots as a log entry never panics, and a decoded entry
//! re-encodes to an entry that decodes to the same value. Most inputs get a
//! valid commit mark and checksum patched in first, so the fuzzer reaches
//! the field parsing behind them (as a hostile pool with correct checksums
//! would).
#![no_main]
use libfuzzer_sys::fuzz_target;
use manyfs::format::{COMMIT_MAGIC, Entry};

fuzz_target!(|data: &[u8]| {
    let _ = Entry::claimed_slots(data);
    let _ = Entry::decode(data);
    if data.len() < 65 {
        return;
    }
    // First byte chooses how many slots the patched copy keeps.
    let slots = (usize::from(data[0]) % 10) + 1;
    let mut e = data[1..].to_vec();
    e.resize(slots * 64, 0);
    e[1] = slots as u8;
    e[56..64].fill(0);
    let crc = crc32fast::hash(&e);
    e[56..60].copy_from_slice(&crc.to_le_bytes());
    e[60..64].copy_from_slice(&COMMIT_MAGIC.to_le_bytes());
    if let Some((entry, flags)) = Entry::decode(&e) {
        let enc = entry.encode(flags & 1 != 0);
        let mut committed = enc.body.to_vec();
        committed[56..64].copy_from_slice(&enc.commit_word.to_le_bytes());
        let (again, _) = Entry::decode(&committed).expect("re-encoded entry decodes");
        assert_eq!(again, entry);
    }
});
