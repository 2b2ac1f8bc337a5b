//! `manyfs-mount POOL MOUNTPOINT [--foreground] [-o opt,opt]`: the same as
//! `manyfs mount`, as a stand-alone helper.

use clap::Parser;

/// Mount a manyfs pool through FUSE.
#[derive(Debug, Parser)]
#[command(name = "manyfs-mount", version)]
struct Cli {
    #[command(flatten)]
    args: manyfs_fuse::cli::MountArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = manyfs_fuse::cli::run(&cli.args, &[]) {
        eprintln!("manyfs-mount: {e}");
        std::process::exit(1);
    }
}
