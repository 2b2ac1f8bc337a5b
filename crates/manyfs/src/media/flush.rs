//! Cache-line write-back and store fences, chosen once by CPUID.

/// Which instruction writes a cache line back to the persistence domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlushInstr {
    /// `clwb`: writes back and keeps the line cached (best).
    Clwb,
    /// `clflushopt`: writes back and evicts; weakly ordered.
    ClflushOpt,
    /// `clflush`: writes back and evicts; strongly ordered (slowest).
    Clflush,
    /// No cache-line flush available (non-x86); a full fence stands in.
    #[cfg(not(target_arch = "x86_64"))]
    None,
}

impl FlushInstr {
    /// The best flush instruction this CPU offers.
    pub fn detect() -> FlushInstr {
        #[cfg(target_arch = "x86_64")]
        {
            // `cpuid` is always available on x86_64; leaf 7 sub-leaf 0 returns
            // zeros on CPUs that do not implement it.
            let leaf7 = std::arch::x86_64::__cpuid_count(7, 0);
            if leaf7.ebx & (1 << 24) != 0 {
                return FlushInstr::Clwb;
            }
            if leaf7.ebx & (1 << 23) != 0 {
                return FlushInstr::ClflushOpt;
            }
            FlushInstr::Clflush
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            FlushInstr::None
        }
    }

    /// Write back the cache line holding `addr`.
    ///
    /// # Safety
    /// `addr` must point into memory mapped by this process.
    #[inline]
    pub unsafe fn flush_line(self, addr: *const u8) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller guarantees `addr` is mapped; these instructions
        // only write the line back and do not change memory contents.
        unsafe {
            match self {
                FlushInstr::Clwb => {
                    std::arch::asm!("clwb [{0}]", in(reg) addr, options(nostack, preserves_flags))
                }
                FlushInstr::ClflushOpt => std::arch::asm!(
                    "clflushopt [{0}]",
                    in(reg) addr,
                    options(nostack, preserves_flags)
                ),
                FlushInstr::Clflush => {
                    std::arch::asm!("clflush [{0}]", in(reg) addr, options(nostack, preserves_flags))
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = addr;
    }

    /// Order all earlier flushes and non-temporal stores before later stores.
    #[inline]
    pub fn store_fence(self) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `sfence` has no operands and no memory effects beyond ordering.
        unsafe {
            std::arch::asm!("sfence", options(nostack, preserves_flags))
        }
        #[cfg(not(target_arch = "x86_64"))]
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }
}
