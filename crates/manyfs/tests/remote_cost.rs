//! The emulated remote-access cost model (`MountOptions::remote_cost`):
//! a read of data on another node's member costs exactly its price, a
//! local one nothing, the model off nothing; the machine's own topology
//! refuses it with a typed error.

mod common;

use manyfs::diag::remote_charged_ns;
use manyfs::lowlevel::FileExt;
use std::path::Path;

use manyfs::{
    Durability, Error, Fs, MkfsOptions, MountOptions, Placement, PoolMember, RemoteCost,
    TopologySpec,
};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 4096;
const PAGES: u64 = 64;

fn opts(placement: Placement, remote_cost: Option<RemoteCost>) -> MountOptions {
    {
        let mut mo = MountOptions::default();
        mo.durability = Durability::Dram;
        mo.topology = TopologySpec::Emulated {
            nodes: 2,
            cpus_per_node: 1,
        };
        mo.placement = placement;
        mo.remote_cost = remote_cost;
        mo
    }
}

/// A pool at `pool` of two 8 MiB members: the pool file on the node
/// other than `node`, member `m1` beside it on `node`.
fn two_node_pool(pool: &Path, node: usize, opts: MountOptions) -> Fs {
    let mkfs = {
        let mut mk = MkfsOptions::default();
        mk.size = 8 * MIB;
        mk.node = (1 - node) as u32;
        mk.members = vec![PoolMember {
            path: pool.with_file_name("m1"),
            node: node as u32,
            size: 8 * MIB,
        }];
        mk
    };
    Fs::mkfs(pool, &mkfs, &opts).unwrap()
}

#[test]
fn the_machines_own_topology_refuses_the_model() {
    let o = opts(Placement::Local, Some(RemoteCost::PAPER));
    let err = common::refused_on_system_topology(o);
    assert!(
        matches!(err, Error::RemoteCostNeedsEmulatedTopology { .. }),
        "{err}"
    );
}

#[test]
fn remote_options_parse_and_print() {
    assert_eq!(RemoteCost::parse_option("off").unwrap(), None);
    assert_eq!(
        RemoteCost::parse_option("paper").unwrap(),
        Some(RemoteCost::PAPER)
    );
    let c = RemoteCost::parse_option("10/20").unwrap().unwrap();
    assert_eq!((c.read_ns_per_kib, c.write_ns_per_kib), (10, 20));
    assert_eq!(c.to_string(), "10/20");
    for bad in ["", "10", "a/b", "1/2/3", "-1/2", "2000000/1"] {
        assert!(
            matches!(
                RemoteCost::parse_option(bad),
                Err(Error::InvalidArgument(_))
            ),
            "{bad}"
        );
    }
}

/// On an emulated 2x1 topology with one member per node, a file whose
/// pages were interleaved over both members is read back: with the model
/// on, the read is charged 4 x 270 ns for each page on the other node and
/// nothing for the local ones, and takes at least that long; mounted with
/// the model off, the same read is charged nothing.
#[test]
fn a_remote_page_costs_its_price_and_a_local_one_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("pool");
    std::thread::scope(|s| {
        s.spawn(|| {
            // Configured CPU = real CPU mod 2, and node = configured CPU.
            let node = common::pin_to_an_allowed_cpu() % 2;
            let fs = two_node_pool(&pool, node, opts(Placement::Interleave, None));
            let f = common::open_rw(&fs, "/f");
            for p in 0..PAGES {
                f.write_all_at(&[p as u8; PAGE as usize], p * PAGE).unwrap();
            }
            let placed = f.blocks_per_node();
            let (local, remote) = (placed.data[node], placed.data[1 - node]);
            assert_eq!(local + remote, PAGES);
            assert!(local > 0 && remote > 0, "{placed:?}");
            drop(f);
            fs.unmount().unwrap();

            let read_all = |cost: Option<RemoteCost>| {
                let fs = Fs::mount(&pool, &opts(Placement::Local, cost)).unwrap();
                let f = common::open_rw(&fs, "/f");
                assert_eq!(f.blocks_per_node(), placed, "a remount moved pages");
                let mut buf = vec![0u8; (PAGES * PAGE) as usize];
                let before = remote_charged_ns();
                let t = std::time::Instant::now();
                f.read_exact_at(&mut buf, 0).unwrap();
                let took = t.elapsed();
                let charged = remote_charged_ns() - before;
                for p in 0..PAGES {
                    assert!(
                        buf[(p * PAGE) as usize..][..PAGE as usize]
                            .iter()
                            .all(|&b| b == p as u8)
                    );
                }
                (charged, took)
            };
            let (charged, took) = read_all(Some(RemoteCost::PAPER));
            let want = remote * 4 * u64::from(RemoteCost::PAPER.read_ns_per_kib);
            assert_eq!(charged, want, "{remote} remote pages of {PAGES}");
            assert!(
                took.as_nanos() as u64 >= want * 9 / 10,
                "read took {took:?}, charged {want} ns"
            );
            let (charged, _) = read_all(None);
            assert_eq!(charged, 0, "the model off charged a read");
        });
    });
}

/// With placement=local, a thread's writes (data and its sub-log) stay on
/// its own node's member, and neither writing nor reading them back is
/// charged.
#[test]
fn local_writes_and_reads_cost_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            let node = common::pin_to_an_allowed_cpu() % 2;
            let fs = two_node_pool(
                &dir.path().join("pool"),
                node,
                opts(Placement::Local, Some(RemoteCost::PAPER)),
            );
            let f = common::open_rw(&fs, "/f");
            f.write_all_at(&[1u8; PAGE as usize], 0).unwrap();
            let before = remote_charged_ns();
            for _ in 0..100 {
                f.write_all_at(&[2u8; PAGE as usize], 0).unwrap();
            }
            let mut buf = [0u8; PAGE as usize];
            f.read_exact_at(&mut buf, 0).unwrap();
            assert_eq!(remote_charged_ns() - before, 0);
            assert_eq!(buf, [2u8; PAGE as usize]);
            let placed = f.blocks_per_node();
            assert_eq!(placed.data[1 - node], 0, "{placed:?}");
            assert!(placed.log[node] > 0, "{placed:?}");
        });
    });
}
