//! Decoding arbitrary bytes as an inode record never panics; whatever
//! decodes re-encodes to the same bytes. Half the inputs get their magic and
//! checksum patched in, so the field checks behind them are reached.
#![no_main]
use libfuzzer_sys::fuzz_target;
use manyfs::format::{INODE_MAGIC, INODE_SIZE, InodeRecord};

fuzz_target!(|data: &[u8]| {
    let mut b = data.to_vec();
    if b.len() >= INODE_SIZE as usize && b[0] & 1 == 1 {
        b[..4].copy_from_slice(&INODE_MAGIC.to_le_bytes());
        let mut h = crc32fast::Hasher::new();
        h.update(&b[..24]);
        h.update(&[0u8; 8]);
        h.update(&b[32..124]);
        let crc = h.finalize();
        b[124..128].copy_from_slice(&crc.to_le_bytes());
    }
    if let Ok(rec) = InodeRecord::decode(7, &b) {
        let enc = rec.encode();
        // Bytes the record does not use (padding) are not compared.
        assert_eq!(&enc[..9], &b[..9]);
        assert_eq!(&enc[12..56], &b[12..56]);
        assert!(b.len() >= INODE_SIZE as usize);
    }
});
