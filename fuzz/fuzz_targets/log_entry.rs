//! Decoding arbitrary slots as a log entry never panics, and a decoded entry
//! re-encodes to an entry that decodes to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;
use manyfs::layout::Entry;

fuzz_target!(|data: &[u8]| {
    let _ = Entry::claimed_slots(data);
    if let Some((entry, flags)) = Entry::decode(data) {
        let enc = entry.encode(flags & 1 != 0);
        let mut committed = enc.body.clone();
        committed[56..64].copy_from_slice(&enc.commit_word.to_le_bytes());
        let (again, _) = Entry::decode(&committed).expect("re-encoded entry decodes");
        assert_eq!(again, entry);
    }
});
