//! The crash explorer over ACE-style, durability, random and concurrent
//! workloads, for each media model: persistent memory (x86 cache lines),
//! a file mapped through the page cache, and a block device with a volatile
//! write cache.

// The tests live in a module of the binary's name, so that their names
// (`crash_explorer::...`) can be told apart from every other test's:
// scripts/test.sh runs this binary beside the rest of the suite and skips
// it there with `--skip crash_explorer::`.
mod crash_explorer {
    use manyfs_crashtest::oracle::{TORN_AT_LINES, TORN_AT_SECTORS};
    use manyfs_crashtest::{self as crashtest, Config, MediaModel, PlantedBug, Stats, Workload};
    use std::time::Instant;

    use manyfs_sync::testing as test_support;

    /// Images per model. Together they reach 64,000 in CI
    /// (`MANYFS_CRASH_IMAGES` sets that total): 40% for persistent memory,
    /// 30% for each page model. The workloads are ordered so that 19,200
    /// page-model images cover the concurrent writers, the durability and
    /// regression workloads, every single operation and the random
    /// three-operation sequences. Every ordered pair of operations (39,000
    /// page-model images, `MANYFS_CRASH_IMAGES=130000`) and beyond is the
    /// release survey of docs/guarantees.md.
    fn min_images(model: MediaModel) -> u64 {
        let total = std::env::var("MANYFS_CRASH_IMAGES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64_000);
        match model {
            MediaModel::Pm => total * 4 / 10,
            MediaModel::PageCache | MediaModel::BlockDev => total * 3 / 10,
        }
    }

    fn run(workloads: &[Workload], cfg: &Config, min: u64) -> Stats {
        let mut stats = Stats::default();
        let t = Instant::now();
        crashtest::explore_all(workloads, cfg, min, &mut stats, |_| {}).unwrap();
        println!(
            "model {}: {stats} in {:.1}s",
            cfg.model,
            t.elapsed().as_secs_f64()
        );
        for v in stats.violations.iter().take(10) {
            println!("violation: {v}");
        }
        stats
    }

    fn assert_clean(stats: &Stats, min: u64) {
        assert!(
            stats.violations.is_empty(),
            "{} violations, first: {}",
            stats.violations.len(),
            stats.violations[0]
        );
        assert!(stats.images >= min, "only {} images", stats.images);
    }

    #[test]
    fn every_crash_image_recovers_to_an_allowed_state() {
        let cfg = Config::default();
        let min = min_images(MediaModel::Pm);
        let stats = run(&crashtest::standard_workloads(7), &cfg, min);
        assert_clean(&stats, min);
    }

    fn page_model_run(model: MediaModel) {
        let cfg = Config {
            model,
            ..Config::default()
        };
        let min = min_images(model);
        let stats = run(&crashtest::standard_workloads(7), &cfg, min);
        assert_clean(&stats, min);
    }

    #[test]
    fn every_crash_image_recovers_on_a_page_cache() {
        page_model_run(MediaModel::PageCache);
    }

    #[test]
    fn every_crash_image_recovers_on_a_block_device() {
        page_model_run(MediaModel::BlockDev);
    }

    #[test]
    fn page_model_regressions() {
        // Scenarios that once broke the engine on these media: a symlink whose
        // name counted without its target (after a sync, or after the fsync of
        // a file next to it), and a link into a directory renamed later (whose
        // states the oracle must judge per directory).
        let workloads = crashtest::regression_workloads();
        for model in [MediaModel::PageCache, MediaModel::BlockDev] {
            let cfg = Config {
                model,
                ..Config::default()
            };
            let stats = run(&workloads, &cfg, 0);
            assert_clean(&stats, 50);
        }
    }

    #[test]
    fn page_model_oracles_accept_every_state_the_engine_was_in() {
        // Only the two images every engine with complete syncs must pass:
        // nothing in flight persisted (the state at the last sync) and all of it
        // (the state in memory). A violation here is a bug in the oracles.
        let mut workloads = crashtest::durability_workloads();
        workloads.extend(crashtest::standard_workloads(7).into_iter().take(80));
        for model in [MediaModel::PageCache, MediaModel::BlockDev] {
            let cfg = Config {
                model,
                extremes_only: true,
                recovery_every: 0,
                ..Config::default()
            };
            let stats = run(&workloads, &cfg, 0);
            assert_clean(&stats, 500);
        }
    }

    #[test]
    fn a_dropped_flush_is_found() {
        // Planted bug: every flush shorter than a cache line (commit words, log
        // links) is silently dropped, so a write can return while its commit
        // mark is still only in the CPU cache.
        let cfg = Config {
            planted_bug: Some(PlantedBug::DroppedFlush),
            recovery_every: 0,
            ..Config::default()
        };
        let mut stats = Stats::default();
        let t = Instant::now();
        let workloads = crashtest::ace_workloads();
        crashtest::explore_all(&workloads[..4], &cfg, 0, &mut stats, |_| {}).unwrap();
        println!(
            "found {} violations in {:.2}s ({} images, {} crash points); first: {}",
            stats.violations.len(),
            t.elapsed().as_secs_f64(),
            stats.images,
            stats.crash_points,
            stats
                .violations
                .first()
                .map(|v| v.to_string())
                .unwrap_or_default()
        );
        assert!(
            !stats.violations.is_empty(),
            "the explorer missed a dropped flush ({} images)",
            stats.images
        );
    }

    const LOST: &str = "SYNCED CHANGE LOST";

    #[test]
    fn a_forgotten_sync_is_found_by_the_page_models_only() {
        // Planted bug: the first sync of each workload does nothing (an fsync
        // that forgets its msync). Every operation followed by a sync must be
        // there once the sync returned.
        let workloads = crashtest::sync_tail_workloads();
        for model in MediaModel::ALL {
            let cfg = Config {
                model,
                planted_bug: Some(PlantedBug::ForgottenSync),
                recovery_every: 0,
                keep_going: true,
                ..Config::default()
            };
            let t = Instant::now();
            let stats = run(&workloads, &cfg, 0);
            let lost: Vec<_> = stats
                .violations
                .iter()
                .filter(|v| v.detail.starts_with(LOST))
                .collect();
            // In file mode one fsync is several durability points (ranged
            // syncs, then the marks): forgetting the first of them may show as
            // a lost synced change or as a torn, unmountable state. Either way
            // the bug is caught.
            let caught: std::collections::BTreeSet<&str> = stats
                .violations
                .iter()
                .map(|v| v.workload.as_str())
                .collect();
            println!(
                "model {model}: forgotten sync caught in {} of {} workloads in {:.2}s; first: {}",
                caught.len(),
                workloads.len(),
                t.elapsed().as_secs_f64(),
                lost.first().map(|v| v.to_string()).unwrap_or_default()
            );
            if model.is_paged() {
                // A later durability point of the same fsync may cover what the
                // forgotten one should have: not every workload can show it.
                assert!(
                    !caught.is_empty(),
                    "the page models missed a forgotten sync"
                );
            } else {
                // Persistent memory has no use for syncs: nothing to see.
                assert!(stats.violations.is_empty(), "{}", stats.violations[0]);
            }
            // Without the bug, nothing is found.
            clean_without_the_bug(&workloads, &cfg);
        }
    }

    #[test]
    fn special_files_xattrs_and_exchanges_are_crash_atomic_on_pm() {
        let cfg = Config::default();
        let workloads = crashtest::posix_workloads();
        // Every operation succeeds (a failing one would be explored as a no-op).
        for w in &workloads {
            let dir = tempfile::tempdir().unwrap();
            let opts = {
                let mut mo = manyfs::MountOptions::default();
                mo.durability = manyfs::Durability::Dram;
                mo
            };
            let mkfs = {
                let mut mk = manyfs::MkfsOptions::default();
                mk.size = w.pool_size;
                mk
            };
            let fs = manyfs::Fs::mkfs(&dir.path().join("pool"), &mkfs, &opts).unwrap();
            for op in w.setup.iter().chain(&w.ops) {
                op.apply(&fs)
                    .unwrap_or_else(|e| panic!("{}: {op:?}: {e}", w.name));
            }
        }
        let stats = run(&workloads, &cfg, 0);
        assert_clean(&stats, 400);
    }

    /// The `posix-*` workloads whose name satisfies `keep`, under both page
    /// models.
    fn posix_on_page_models(keep: impl Fn(&str) -> bool) {
        let workloads: Vec<Workload> = crashtest::posix_workloads()
            .into_iter()
            .filter(|w| keep(&w.name))
            .collect();
        for model in [MediaModel::PageCache, MediaModel::BlockDev] {
            let cfg = Config {
                model,
                keep_going: true,
                ..Config::default()
            };
            let stats = run(&workloads, &cfg, 0);
            assert_clean(&stats, 50);
        }
    }

    #[test]
    fn xattr_changes_on_a_page_cache_and_a_block_device() {
        posix_on_page_models(|name| name == "posix-xattr");
    }

    #[test]
    fn special_files_and_exchanges_on_a_page_cache_and_a_block_device() {
        posix_on_page_models(|name| name != "posix-xattr");
    }

    /// Pools of two members (the pool file and `m1`): every single operation
    /// after a setup that fills member 0, and every crash image of it (split
    /// over the two files) under the persistent-memory model recovers to an
    /// allowed state. The page models are refused for such pools, not
    /// silently run on one file.
    #[test]
    fn two_member_pools_recover_to_an_allowed_state_on_pm() {
        // The setup does reach member 1 (the explorer's pools are made alike).
        let dir = tempfile::tempdir().unwrap();
        let fs = manyfs::Fs::mkfs(
            &dir.path().join("pool"),
            &{
                let mut mk = manyfs::MkfsOptions::default();
                mk.size = crashtest::MEMBER0_BYTES;
                mk.bytes_per_inode = 16 << 10;
                mk.members = vec![manyfs::PoolMember {
                    path: dir.path().join("m1"),
                    node: 1,
                    size: crashtest::MEMBER1_BYTES,
                }];
                mk
            },
            &{
                let mut mo = manyfs::MountOptions::default();
                mo.durability = manyfs::Durability::Dram;
                mo
            },
        )
        .unwrap();
        let mut hist = crashtest::oracle::History::new();
        for op in &crashtest::member_setup() {
            hist.setup(op, &fs);
        }
        assert!(
            fs.stats().members[1].used_blocks > 0,
            "{:?}",
            fs.stats().members
        );
        drop(fs);
        let workloads = crashtest::member_workloads();
        let stats = run(&workloads, &Config::default(), 0);
        assert_eq!(stats.workloads as usize, workloads.len());
        assert_clean(&stats, 1000);
        let paged = Config {
            model: MediaModel::PageCache,
            ..Config::default()
        };
        let mut s = Stats::default();
        let err = crashtest::explore(&workloads[0], &paged, &mut s).unwrap_err();
        assert!(err.to_string().contains("pm model only"), "{err}");
    }

    /// Tiered pools (file data on a data device, logs and inodes on a `file`
    /// pool): every crash image, with the page-cache model over the pool and
    /// the volatile-cache model over the device (any subset of the device
    /// writes since its last flush, each block at one of its values), mounts,
    /// checks clean, shows what the last fsync covered and no foreign bytes.
    #[test]
    fn tiered_pools_recover_to_an_allowed_state() {
        let cfg = Config {
            model: MediaModel::PageCache,
            ..Config::default()
        };
        let stats = run(&crashtest::tier_workloads(), &cfg, 0);
        assert_clean(&stats, 1000);
    }

    /// Run `workloads` with the bug `cfg` plants and say what was found: the
    /// violations, the workloads they were in, the time, the first one.
    fn planted_run(what: &str, workloads: &[Workload], cfg: &Config) -> Stats {
        let t = Instant::now();
        let stats = run(workloads, cfg, 0);
        let caught = caught_in(&stats);
        println!(
            "{what}: {} violations in {} of {} workloads in {:.2}s; first: {}",
            stats.violations.len(),
            caught.len(),
            workloads.len(),
            t.elapsed().as_secs_f64(),
            stats
                .violations
                .first()
                .map(|v| v.to_string())
                .unwrap_or_default()
        );
        stats
    }

    /// The same run as `cfg` without its planted bug finds nothing.
    fn clean_without_the_bug(workloads: &[Workload], cfg: &Config) -> Stats {
        let clean = run(
            workloads,
            &Config {
                planted_bug: None,
                ..cfg.clone()
            },
            0,
        );
        assert!(clean.violations.is_empty(), "{}", clean.violations[0]);
        clean
    }

    /// The workloads with a violation.
    fn caught_in(stats: &Stats) -> std::collections::BTreeSet<&str> {
        stats
            .violations
            .iter()
            .map(|v| v.workload.as_str())
            .collect()
    }

    /// Planted bug: the data device is never really flushed, so an fsync's
    /// marks make entries durable whose data may still be in the device's
    /// cache. The tier workloads must catch it; the same run without the bug
    /// must not.
    #[test]
    fn an_entry_committed_without_a_device_flush_is_found() {
        let cfg = Config {
            model: MediaModel::PageCache,
            planted_bug: Some(PlantedBug::SkippedDeviceFlush),
            recovery_every: 0,
            keep_going: true,
            max_violations: 3,
            ..Config::default()
        };
        let workloads: Vec<Workload> = crashtest::tier_workloads()
            .into_iter()
            .filter(|w| w.name.starts_with("tier-dur"))
            .collect();
        let stats = planted_run("skipped device flush", &workloads, &cfg);
        assert!(
            !stats.violations.is_empty(),
            "the explorer missed an fsync that does not flush the device"
        );
    }

    #[test]
    fn tiered_pools_are_refused_by_the_block_device_model() {
        let w = &crashtest::tier_workloads()[0];
        let cfg = Config {
            model: MediaModel::BlockDev,
            ..Config::default()
        };
        let err = crashtest::explore(w, &cfg, &mut Stats::default()).unwrap_err();
        assert!(
            err.to_string().contains("pagecache and pm models only"),
            "{err}"
        );
    }

    /// A `pm` pool with a data device: pool stores under the persistent-memory
    /// model (flushed and fenced lines persist, others may, 8-byte words), the
    /// device under the volatile-cache model, in one image; crash points at
    /// every fence, every device flush and between operations. The tier's
    /// promise is `file` mode's (durable once an fsync or sync returned), and
    /// the same oracles hold.
    #[test]
    fn tiered_pm_pools_recover_to_an_allowed_state() {
        let cfg = Config::default();
        let min = tier_min_images();
        let workloads = crashtest::tier_standard_workloads(11);
        let stats = run(&workloads, &cfg, min);
        assert_clean(&stats, min);
        assert_staged(&stats, &workloads);
    }

    /// A pm-model tier run of the first `stats.workloads` of `workloads`
    /// staged: the `tier-staged` workload fails on its own if it stages
    /// nothing, and at least half as many workloads staged as there were
    /// staging random workloads (three in four of those stage on their own),
    /// so that the crash states explored cover staged data in the pool.
    fn assert_staged(stats: &Stats, workloads: &[Workload]) {
        let staging_random = workloads[..stats.workloads as usize]
            .iter()
            .filter(|w| w.name.starts_with("tier-staged-random"))
            .count() as u64;
        println!(
            "staged {} pages in {} of {} workloads ({staging_random} staging random ones)",
            stats.staged_pages, stats.staging_workloads, stats.workloads
        );
        assert!(staging_random > 0, "no staging random workload ran");
        assert!(
            stats.staging_workloads * 2 >= staging_random,
            "only {} workloads staged ({} pages) of {staging_random} meant to: staging stopped",
            stats.staging_workloads,
            stats.staged_pages
        );
    }

    /// Planted bugs on a `pm` pool with a data device: the device never really
    /// flushed (an fsync whose marks, flushed and fenced on the pool, commit
    /// data still in the device's cache) is found; the same run without it is
    /// clean.
    #[test]
    fn a_skipped_device_flush_is_found_on_a_pm_pool() {
        let workloads: Vec<Workload> = crashtest::tier_workloads()
            .into_iter()
            .filter(|w| w.name.starts_with("tier-dur"))
            .collect();
        let cfg = Config {
            planted_bug: Some(PlantedBug::SkippedDeviceFlush),
            recovery_every: 0,
            keep_going: true,
            max_violations: 3,
            ..Config::default()
        };
        let stats = planted_run("pm, skipped device flush", &workloads, &cfg);
        assert!(
            !stats.violations.is_empty(),
            "the explorer missed an fsync that does not flush the device (pm)"
        );
        clean_without_the_bug(&workloads, &cfg);
    }

    /// Planted bug in the engine (`manyfs::diag::EngineBug::StagedBlockFreedEarly`):
    /// a pool block that a staged write superseded is freed when the write
    /// returns instead of after the file's next sync, so a later staged write
    /// reuses it while, after a crash, the superseded entry still counts and
    /// shows the reused block's bytes. The staging workloads under the pm model
    /// must find it; the same run without it must not.
    #[test]
    fn a_staged_block_freed_early_is_found() {
        let mut workloads: Vec<Workload> = crashtest::tier_workloads()
            .into_iter()
            .filter(|w| w.name == "tier-staged")
            .collect();
        workloads.extend(crashtest::tier_staged_random_workloads(3, 30, 8));
        let cfg = Config {
            planted_bug: Some(PlantedBug::StagedBlockFreedEarly),
            recovery_every: 0,
            keep_going: true,
            max_violations: 3,
            ..Config::default()
        };
        let stats = planted_run("staged block freed early", &workloads, &cfg);
        let caught = caught_in(&stats);
        // `tier-staged` makes the reuse happen: an unsynced staged overwrite
        // supersedes synced staged pages, and the next one takes a new block.
        assert!(
            caught.contains("tier-staged"),
            "the explorer missed a superseded staged block freed before the sync \
         ({} violations, {} pages staged)",
            stats.violations.len(),
            stats.staged_pages
        );
        let clean = clean_without_the_bug(&workloads, &cfg);
        assert!(clean.staged_pages > 0, "nothing staged");
    }

    /// Tier images per test in CI: 20,000 reach past the tier's durability,
    /// single-operation and concurrent workloads into the random sequences
    /// (about 20 s each in the test build). The survey at scale is a release
    /// command (docs/guarantees.md, "Tiered pools"): `MANYFS_TIER_IMAGES=100000
    /// cargo test --release -p manyfs-crashtest --test crash_explorer tiered`.
    fn tier_min_images() -> u64 {
        std::env::var("MANYFS_TIER_IMAGES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20_000)
    }

    /// The tier at scale: the tier workloads, concurrent writers on the data
    /// device, then random mixes of overwrites (in place once settled),
    /// appends, truncates, fsync/fdatasync, unlinks, re-creates and renames
    /// over four files, until [`tier_min_images`] distinct images were checked.
    #[test]
    fn tiered_pools_at_scale() {
        let cfg = Config {
            model: MediaModel::PageCache,
            ..Config::default()
        };
        let min = tier_min_images();
        let stats = run(&crashtest::tier_standard_workloads(7), &cfg, min);
        assert_clean(&stats, min);
    }

    /// A device whose writes tear at 512-byte sectors (its atomic write unit
    /// one 512-byte logical block; docs/guarantees.md says when that is): the
    /// tier workloads under both pool models with device blocks mixed sector
    /// by sector. What must still hold: every image mounts and verifies, fsync'd
    /// data is there in full, no file shows bytes it was not given. What does
    /// not: an unsynced write in place may show torn (some sectors old, some
    /// new), which is the only kind of violation allowed here.
    #[test]
    fn torn_device_sectors_break_only_unsynced_in_place_atomicity() {
        for model in [MediaModel::PageCache, MediaModel::Pm] {
            let cfg = Config {
                model,
                torn_sectors: true,
                keep_going: true,
                max_violations: 1000,
                version_mixes: 16,
                word_mixes: 16,
                ..Config::default()
            };
            let stats = run(&crashtest::tier_standard_workloads(13), &cfg, 5_000);
            let torn: Vec<_> = stats
                .violations
                .iter()
                .filter(|v| {
                    v.detail
                        .contains("content is no combination of whole writes")
                })
                .collect();
            println!(
                "model {model}, torn sectors: {} images, {} torn unsynced writes in {} workloads",
                stats.images,
                torn.len(),
                torn.iter()
                    .map(|v| v.workload.as_str())
                    .collect::<std::collections::BTreeSet<_>>()
                    .len()
            );
            for v in &stats.violations {
                assert!(is_torn_unsynced_write(&v.detail), "{v}");
            }
            // The device model does tear: the run shows what it allows.
            assert!(!torn.is_empty(), "no torn write in {} images", stats.images);
        }
    }

    /// Whether a violation's detail is the one a device that tears writes at
    /// 512-byte sectors may cause: a file whose content is, sector by sector,
    /// a combination of whole writes since its last sync, but not as a whole
    /// (the oracle's [`TORN_AT_SECTORS`]). Not a synced change lost, not bytes
    /// of another file or of no write (the foreign-bytes check reports those
    /// first, as `SECURITY`), not a name space, mount or fsck problem.
    fn is_torn_unsynced_write(detail: &str) -> bool {
        detail.starts_with('/') && detail.contains(&format!(": {TORN_AT_SECTORS}: "))
    }

    #[test]
    fn the_torn_sector_check_accepts_nothing_else() {
        let torn = format!(
            "/A: {TORN_AT_SECTORS}: content is no combination of whole writes since its last \
         sync, but each 512-byte sector is the same sector of one (4096 bytes, 1 pending writes)"
        );
        assert!(is_torn_unsynced_write(&torn));
        for other in [
            format!("{LOST}: {torn}"),
            "SECURITY: /A (inode 5) holds at offset 0 bytes of write 0x31 to /B".into(),
            "SECURITY: /A (inode 5) holds at offset 7 bytes no write produced ([1, 2])".into(),
            "/A: content is no combination of whole writes since its last sync (4096 bytes, \
         1 pending writes; latest state has 4096 bytes; first difference at 512: unknown \
         bytes there)"
                .into(),
            "mount failed: corrupt".into(),
            "name space is no combination of whole operations since the last sync (1 unsynced)"
                .into(),
        ] {
            assert!(!is_torn_unsynced_write(&other), "{other}");
        }
    }

    #[test]
    fn the_second_sublog_workload_makes_a_log_array() {
        // The crash states above of `dur-second-sublog` cross the change of a
        // log word to a log array only if its writes from two CPUs reach two
        // sub-logs: check that they do here (on a machine with two CPUs).
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            test_support::skip(
                "the_second_sublog_workload_makes_a_log_array",
                test_support::Lack::Machine,
                "one CPU: the workload writes one sub-log",
            );
            return;
        }
        let w = crashtest::regression_workloads()
            .into_iter()
            .find(|w| w.name == "dur-second-sublog")
            .expect("the workload");
        let dir = tempfile::tempdir().unwrap();
        let fs = manyfs::Fs::mkfs(
            &dir.path().join("pool"),
            &{
                let mut mk = manyfs::MkfsOptions::default();
                mk.size = w.pool_size;
                mk
            },
            &{
                let mut mo = manyfs::MountOptions::default();
                mo.durability = manyfs::Durability::Dram;
                mo
            },
        )
        .unwrap();
        for op in &w.setup {
            op.apply(&fs).unwrap();
        }
        let before = fs.stats().log_arrays;
        for op in &w.ops {
            op.apply(&fs).unwrap();
        }
        // /N's (made on one CPU, then written on the other), and /D's unless
        // its earlier names came from the CPU of the second writes.
        assert!(
            fs.stats().log_arrays > before,
            "{} arrays",
            fs.stats().log_arrays
        );
    }

    /// Workloads whose thread moves between CPUs between operations (a write
    /// after a sync from a CPU the log has not seen, sub-logs and log arrays
    /// made while synced entries exist), in every media model.
    #[test]
    fn migrating_workloads_recover_in_every_model() {
        clean_in_every_model(&crashtest::migrating_random_workloads(5, 16, 10));
    }

    /// `workloads` under every model: no violation, at least 1,000 images each.
    fn clean_in_every_model(workloads: &[Workload]) {
        for model in MediaModel::ALL {
            let cfg = Config {
                model,
                ..Config::default()
            };
            let stats = run(workloads, &cfg, 0);
            assert_clean(&stats, 1000);
        }
    }

    /// The migration dimension's planted bug: a log array linked from the
    /// inode record before a barrier made it durable. The migrating workloads
    /// find it under both page models (pm cannot: there the array's lines are
    /// flushed and fenced before the record's word either way).
    #[test]
    fn a_log_array_linked_before_it_is_durable_is_found_by_migrating_workloads() {
        let workloads = crashtest::migrating_random_workloads(5, 16, 10);
        for model in [MediaModel::PageCache, MediaModel::BlockDev] {
            let cfg = Config {
                model,
                planted_bug: Some(PlantedBug::ArrayLinkedBeforeDurable),
                ..Config::default()
            };
            let t = Instant::now();
            let stats = run(&workloads, &cfg, 0);
            assert!(
                !stats.violations.is_empty(),
                "{model}: the planted bug went unseen in {} images",
                stats.images
            );
            println!(
                "{model}: found in {:.2}s, {} images",
                t.elapsed().as_secs_f64(),
                stats.images
            );
        }
    }

    /// Random attribute changes (mode, setuid/setgid, owner, ACLs, user
    /// xattrs, times) from several CPUs, in every model, with the attribute
    /// oracle: each change whole or absent, a chmod with the ACL it rewrites.
    #[test]
    fn attribute_changes_recover_in_every_model() {
        clean_in_every_model(&crashtest::attr_random_workloads(7, 20, 8));
    }

    /// The attribute dimension's planted bug: a chmod logs the mode and the
    /// ACL it rewrites apart. The pm model's attribute workloads find it (a
    /// crash between the two appends).
    #[test]
    fn a_mode_and_acl_logged_apart_are_found() {
        let cfg = Config {
            model: MediaModel::Pm,
            planted_bug: Some(PlantedBug::ModeAndAclApart),
            ..Config::default()
        };
        let t = Instant::now();
        let stats = run(&crashtest::attr_random_workloads(7, 30, 8), &cfg, 0);
        assert!(
            stats.violations.iter().any(|v| v.detail.contains("Attrs(")),
            "the planted bug went unseen in {} images",
            stats.images
        );
        println!("found in {:.2}s", t.elapsed().as_secs_f64());
    }

    /// Pool pages torn by write-back racing stores (64-byte lines) or by a
    /// drive's 512-byte sectors, under both page models. What must hold: every
    /// image mounts and verifies, synced data is there, no file shows bytes it
    /// was not given, attributes whole. What may break: an unsynced overwrite
    /// in place, which writes the page itself (docs/guarantees.md), may show
    /// torn (reported as TORN AT LINES or TORN AT SECTORS); that is the only
    /// violation allowed here, and the model must produce some.
    #[test]
    fn torn_pool_pages_break_only_unsynced_in_place_atomicity() {
        let mut workloads = crashtest::durability_workloads();
        workloads.extend(crashtest::migrating_random_workloads(9, 10, 10));
        workloads.extend(crashtest::attr_random_workloads(9, 10, 8));
        // Lines on the page cache, sectors on the block device (every model
        // and unit: `manyfs crashtest --torn-pages`, docs/guarantees.md).
        for (model, unit) in [(MediaModel::PageCache, 64), (MediaModel::BlockDev, 512)] {
            let cfg = Config {
                model,
                torn_pages: Some(unit),
                keep_going: true,
                max_violations: 1000,
                version_mixes: 16,
                ..Config::default()
            };
            let stats = run(&workloads, &cfg, 0);
            for v in &stats.violations {
                assert!(is_torn_page_write(&v.detail), "{v}");
            }
            println!(
                "model {model}, pages torn at {unit} bytes: {} images, {} torn unsynced writes",
                stats.images,
                stats.violations.len()
            );
            // The model does tear: the run shows what it allows.
            assert!(
                !stats.violations.is_empty(),
                "no torn write in {} images",
                stats.images
            );
        }
    }

    /// Whether a violation is the one a page torn under an unsynced overwrite
    /// in place may cause: a file whose content is, sector by sector or line
    /// by line, a combination of whole writes since its last sync.
    fn is_torn_page_write(detail: &str) -> bool {
        is_torn_unsynced_write(detail)
            || (detail.starts_with('/') && detail.contains(&format!(": {TORN_AT_LINES}: ")))
    }
}
