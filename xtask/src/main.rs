//! Repository checks for manyfs, run by CI (`scripts/test.sh`):
//!
//! - `cargo run -p xtask -- layers [CRATE_SRC] [--dot]`: the dependency
//!   graph between the library's modules (re-exports followed, inherent
//!   methods held to their type's module); exits 1 on a cycle among the
//!   children of any module or an inherent `impl` outside its type's module.
//! - `cargo run -p xtask -- public-items [CRATE_SRC] [--list]`: the count of
//!   the library's public items (and the list).

mod layers;
mod model;
mod public;

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let src = args
        .iter()
        .skip(1)
        .find(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("crates/manyfs/src"));
    let krate = match model::Crate::load(&src.join("lib.rs")) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("xtask: {e}");
            return ExitCode::FAILURE;
        }
    };
    match args.first().map(String::as_str) {
        Some("layers") => check_layers(&krate, flag("--dot")),
        Some("public-items") => {
            let (items, count) = public::public_items(&krate);
            if flag("--list") {
                for i in &items {
                    println!("{}  [{}]", i.path, i.kind);
                }
            }
            println!("{count} public items ({} names)", items.len());
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("usage: xtask layers [SRC] [--dot] | xtask public-items [SRC] [--list]");
            ExitCode::FAILURE
        }
    }
}

fn check_layers(krate: &model::Crate, dot: bool) -> ExitCode {
    let graph = layers::graph(krate);
    let name = |m: usize| krate.modules[m].name();
    let short = |m: usize| krate.modules[m].path.last().cloned().unwrap_or_default();
    let mut failed = false;
    let root_edges = graph.get(&0).cloned().unwrap_or_default();
    if dot {
        println!("digraph manyfs {{");
        for &(a, b) in root_edges.keys() {
            println!("  \"{}\" -> \"{}\";", short(a), short(b));
        }
        println!("}}");
    } else {
        for (child_name, &child) in &krate.modules[0].children {
            let deps: Vec<String> = root_edges
                .keys()
                .filter(|(a, _)| *a == child)
                .map(|&(_, b)| short(b))
                .collect();
            println!("{child_name} -> {}", deps.join(" "));
        }
    }
    for (&parent, edges) in &graph {
        for scc in layers::cycles(edges) {
            failed = true;
            let names: Vec<String> = scc.iter().map(|&m| name(m)).collect();
            eprintln!(
                "cycle among the children of `{}`: {}",
                name(parent),
                names.join(", ")
            );
            for (&(a, b), e) in edges {
                if scc.contains(&a) && scc.contains(&b) {
                    eprintln!("  {} -> {}: {}", name(a), name(b), e.example);
                }
            }
        }
    }
    for m in layers::misplaced_impls(krate) {
        failed = true;
        eprintln!("{m}");
    }
    if failed {
        return ExitCode::FAILURE;
    }
    if !dot {
        println!("no cycles; no inherent impl outside its type's module; layers bottom to top:");
        for (i, l) in layers::layers(krate, 0, &root_edges).iter().enumerate() {
            println!("  {i}: {}", l.join(" "));
        }
    }
    ExitCode::SUCCESS
}
