//! Decoding arbitrary bytes as a superblock never panics; whatever decodes
//! re-encodes to the same bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;
use manyfs::layout::{SUPERBLOCK_LEN, Superblock};

fuzz_target!(|data: &[u8]| {
    let pool_len = 64 << 20;
    if let Ok(sb) = Superblock::decode(data, pool_len) {
        assert_eq!(&sb.encode()[..], &data[..SUPERBLOCK_LEN]);
    }
});
