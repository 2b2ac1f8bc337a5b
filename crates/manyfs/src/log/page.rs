//! DRAM bookkeeping of one log page, shared by the append path, the
//! durability marks (`durable.rs`) and the recovery scan (`scan.rs`). It
//! lives in a file of its own so that neither of those two depends on the
//! other for it (the scan builds the records the marks later update).

/// DRAM bookkeeping of one log page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageMeta {
    /// Page sequence (also in the footer).
    pub seq: u64,
    /// Slots used, final once a later page is linked.
    pub used: u64,
    /// The durable mark last written to the footer.
    pub marked: u32,
    /// The checked count last written to the footer (recovered: as read).
    pub checked: u32,
    /// Whether the page's footer is known to be durable.
    pub footer_durable: bool,
    /// The mark a completed barrier made durable together with everything
    /// it covers (0: none known). Entries below it have their data on disk.
    pub mark_durable: u32,
    /// The checked count a completed barrier made durable (0: none known).
    /// Recovery never verifies an entry below it, so the data block of such
    /// an entry may be overwritten in place (`InodeLog::settle_for_overwrite`).
    pub checked_durable: u32,
}

impl PageMeta {
    /// A freshly linked page.
    pub fn new(seq: u64) -> Self {
        PageMeta {
            seq,
            ..Default::default()
        }
    }
}
