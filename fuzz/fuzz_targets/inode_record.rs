//! Decoding arbitrary bytes as an inode record never panics; whatever
//! decodes re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use manyfs::layout::{INODE_SIZE, InodeRecord};

fuzz_target!(|data: &[u8]| {
    if let Ok(rec) = InodeRecord::decode(7, data) {
        let enc = rec.encode();
        // Bytes the record does not use (padding) are not compared.
        assert_eq!(&enc[..12], &data[..12]);
        assert_eq!(&enc[12..56], &data[12..56]);
        assert!(data.len() >= INODE_SIZE as usize);
    }
});
