//! The emulated per-node NVMM bandwidth cap (`MountOptions::bandwidth_cap`):
//! through a mount, writes on one node's member are held to the cap and
//! the time waited is counted; with the cap off nothing waits; the
//! machine's own topology refuses it with a typed error; the option
//! parses and prints.

mod common;

use manyfs::diag::bandwidth_throttled_ns;
use manyfs::{BandwidthCap, Durability, Error, MountOptions, TopologySpec};
use std::time::Instant;

const MIB: u64 = 1 << 20;

fn opts(cap: Option<BandwidthCap>) -> MountOptions {
    {
        let mut mo = MountOptions::default();
        mo.durability = Durability::Dram;
        mo.topology = TopologySpec::Emulated {
            nodes: 2,
            cpus_per_node: 1,
        };
        mo.bandwidth_cap = cap;
        mo
    }
}

#[test]
fn the_machines_own_topology_refuses_the_cap() {
    let err = common::refused_on_system_topology(opts(Some(BandwidthCap::PAPER)));
    let Error::BandwidthCapNeedsEmulatedTopology { cap, .. } = &err else {
        panic!("not the bandwidth cap's error: {err}");
    };
    assert_eq!(cap, "2300M");
    assert!(err.to_string().contains("bandwidth_cap=2300M"), "{err}");
}

#[test]
fn cap_options_parse_and_print() {
    for off in ["off", " none "] {
        assert!(BandwidthCap::parse_option(off).unwrap().is_none(), "{off}");
    }
    for (s, bytes, shown) in [
        ("paper", BandwidthCap::PAPER.bytes_per_sec, "2300M"),
        ("1G", 1_000_000_000, "1G"),
        ("1500M", 1_500_000_000, "1500M"),
        ("2500k", 2_500_000, "2500K"),
        ("1234567", 1_234_567, "1234567"),
    ] {
        let c = BandwidthCap::parse_option(s).unwrap().unwrap();
        assert_eq!(c.bytes_per_sec, bytes, "{s}");
        assert_eq!(c.to_string(), shown);
        assert_eq!(BandwidthCap::parse_option(shown).unwrap(), Some(c));
    }
    for bad in [
        "",
        "G",
        "1T",
        "-1G",
        "999999",
        "1.5G",
        "99999999999999999999G",
    ] {
        assert!(
            matches!(
                BandwidthCap::parse_option(bad),
                Err(Error::InvalidArgument(_))
            ),
            "{bad}"
        );
    }
}

/// Write `bytes` in 64 KiB writes to a fresh file of a one-member pool
/// mounted with `cap`: seconds taken and nanoseconds this thread waited.
fn write_through(cap: Option<BandwidthCap>, bytes: u64) -> (f64, u64) {
    let (_dir, _pool, fs) = common::fresh_with(64 * MIB, &opts(cap));
    let f = common::open_rw(&fs, "/f");
    let chunk = vec![7u8; 64 << 10];
    let before = bandwidth_throttled_ns();
    let t = Instant::now();
    let mut off = 0;
    while off < bytes {
        f.write_all_at(&chunk, off % (16 * MIB)).unwrap();
        off += chunk.len() as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    (secs, bandwidth_throttled_ns() - before)
}

#[test]
fn writes_through_a_mount_are_held_to_the_cap_and_off_costs_nothing() {
    // 8 MiB of data writes (three units a byte) at 20 MB/s weighted: at
    // least 8 MiB / 20 MB/s = 0.42 s, less the bursts (5 ms per CPU).
    let cap = BandwidthCap {
        bytes_per_sec: 20_000_000,
    };
    let (secs, waited) = write_through(Some(cap), 8 * MIB);
    let floor = (8 * MIB) as f64 / 20e6 - 0.02;
    assert!(secs >= floor, "8 MiB under a 20 MB/s cap took {secs:.3} s");
    // Copying, page faults and preemption also take time, paid for by the
    // buckets' refill meanwhile: the waits are only part of it.
    assert!(waited as f64 >= floor * 0.25e9, "waited {waited} ns");
    let (_, waited_off) = write_through(None, 8 * MIB);
    assert_eq!(waited_off, 0, "the cap off made a thread wait");
}
