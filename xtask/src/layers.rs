//! The dependency graph between modules, and the two rules it must keep:
//!
//! - **No cycle** among the children of any module: the top-level modules
//!   of the crate, and the files (or inline modules) of each folder. An edge
//!   `a -> b` means code in `a` names an item defined in `b`, directly or
//!   through re-exports (`crate::Fs` counts as `api::fs`).
//! - **Inherent methods live with their type**: an `impl T { .. }` block
//!   sits in the module that defines `T` or below it. A method call
//!   `x.alloc_blocks()` does not name a module, so this rule is what makes
//!   the edge to `T`'s module also cover its methods.

use crate::model::Crate;
use std::collections::{BTreeMap, BTreeSet};

/// One edge between two sibling modules, with an example of where it comes
/// from.
#[derive(Clone, Debug)]
pub struct Edge {
    pub example: String,
}

/// The edges among the children of each module.
pub type Graph = BTreeMap<usize, BTreeMap<(usize, usize), Edge>>;

/// Every edge of the crate, grouped by the module whose children they join.
pub fn graph(c: &Crate) -> Graph {
    let mut g: Graph = BTreeMap::new();
    for (m, module) in c.modules.iter().enumerate() {
        for r in &module.refs {
            let Some((t, _)) = c.resolve(m, &r.segs) else {
                continue;
            };
            if c.is_within(m, t) || c.is_within(t, m) {
                continue;
            }
            let (parent, a, b) = split_at_common(c, m, t);
            g.entry(parent).or_default().entry((a, b)).or_insert(Edge {
                example: format!(
                    "{}:{} names {}",
                    module.file.display(),
                    r.line,
                    r.segs.join("::")
                ),
            });
        }
    }
    g
}

/// The lowest common ancestor of `m` and `t`, and its children on the way
/// to each.
fn split_at_common(c: &Crate, m: usize, t: usize) -> (usize, usize, usize) {
    let chain = |mut x: usize| {
        let mut v = vec![x];
        while let Some(p) = c.modules[x].parent {
            v.push(p);
            x = p;
        }
        v.reverse();
        v
    };
    let (cm, ct) = (chain(m), chain(t));
    let mut i = 0;
    while i < cm.len() && i < ct.len() && cm[i] == ct[i] {
        i += 1;
    }
    (cm[i - 1], cm[i], ct[i])
}

/// Inherent `impl` blocks outside the module of their type.
pub fn misplaced_impls(c: &Crate) -> Vec<String> {
    let mut out = Vec::new();
    for (m, module) in c.modules.iter().enumerate() {
        for imp in &module.impls {
            let Some((t, Some(name))) = c.resolve(m, &imp.self_ty) else {
                continue;
            };
            if !c.modules[t].defs.contains_key(&name) {
                continue;
            }
            if !c.is_within(m, t) {
                out.push(format!(
                    "{}:{}: `impl {name}` is in `{}`, but `{name}` is defined in `{}`",
                    module.file.display(),
                    imp.line,
                    module.name(),
                    c.modules[t].name()
                ));
            }
        }
    }
    out
}

/// The strongly connected components (size > 1) of one module's children.
pub fn cycles(edges: &BTreeMap<(usize, usize), Edge>) -> Vec<Vec<usize>> {
    let nodes: BTreeSet<usize> = edges.keys().flat_map(|&(a, b)| [a, b]).collect();
    let succ = |n: usize| edges.keys().filter(move |(a, _)| *a == n).map(|(_, b)| *b);
    // Kosaraju on a small graph: reachability sets are enough.
    let reach = |start: usize| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(n) = stack.pop() {
            for s in succ(n) {
                if seen.insert(s) {
                    stack.push(s);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<usize, BTreeSet<usize>> = nodes.iter().map(|&n| (n, reach(n))).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &n in &nodes {
        if done.contains(&n) || !reaches[&n].contains(&n) {
            continue;
        }
        let scc: Vec<usize> = nodes
            .iter()
            .copied()
            .filter(|&x| reaches[&n].contains(&x) && reaches[&x].contains(&n))
            .collect();
        done.extend(scc.iter().copied());
        out.push(scc);
    }
    out
}

/// Layers of one module's children, bottom first (Kahn's algorithm); only
/// meaningful when there is no cycle.
pub fn layers(
    c: &Crate,
    parent: usize,
    edges: &BTreeMap<(usize, usize), Edge>,
) -> Vec<Vec<String>> {
    let mut remaining: BTreeMap<usize, BTreeSet<usize>> = c.modules[parent]
        .children
        .values()
        .map(|&ch| (ch, BTreeSet::new()))
        .collect();
    for &(a, b) in edges.keys() {
        remaining.entry(a).or_default().insert(b);
    }
    let mut out = Vec::new();
    loop {
        let leaves: Vec<usize> = remaining
            .iter()
            .filter(|(_, deps)| deps.is_empty())
            .map(|(&k, _)| k)
            .collect();
        if leaves.is_empty() {
            break;
        }
        for l in &leaves {
            remaining.remove(l);
        }
        for deps in remaining.values_mut() {
            for l in &leaves {
                deps.remove(l);
            }
        }
        out.push(
            leaves
                .iter()
                .map(|&l| c.modules[l].path.last().cloned().unwrap_or_default())
                .collect(),
        );
    }
    out
}
