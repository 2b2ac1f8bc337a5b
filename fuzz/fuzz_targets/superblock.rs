//! Decoding arbitrary bytes as a superblock never panics; whatever decodes
//! re-encodes to the same bytes. Half the inputs get their magic and
//! checksum patched in, so the geometry checks behind them are reached.
#![no_main]
use libfuzzer_sys::fuzz_target;
use manyfs::format::{SUPER_MAGIC, SUPERBLOCK_LEN, Superblock};

fuzz_target!(|data: &[u8]| {
    let pool_len = 64 << 20;
    let mut b = data.to_vec();
    if b.len() >= SUPERBLOCK_LEN && b[0] & 1 == 1 {
        b[..8].copy_from_slice(&SUPER_MAGIC);
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        b[12..16].copy_from_slice(&4096u32.to_le_bytes());
        let crc = crc32fast::hash(&b[..80]);
        b[80..84].copy_from_slice(&crc.to_le_bytes());
    }
    if let Ok(sb) = Superblock::decode(&b, pool_len) {
        // Bytes past the checksum are unused and not compared.
        assert_eq!(&sb.encode()[..84], &b[..84]);
        assert!(b.len() >= SUPERBLOCK_LEN);
    }
});
