//! The crate's public face: every item a user can name from outside
//! (through `pub` modules and `pub use` re-exports), counted the way a
//! semver checker counts them: each type, function, constant, trait and
//! macro, each public field and enum variant, each trait item, and each
//! `pub` method or constant of an inherent `impl` of a public type.

use crate::model::{Crate, DefKind, Vis};
use std::collections::{BTreeMap, BTreeSet};

/// One public item: the path a user names it by, and what it is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PublicItem {
    pub path: String,
    pub kind: String,
}

/// Every public item, and the count of semver-relevant items (members
/// included).
pub fn public_items(c: &Crate) -> (Vec<PublicItem>, usize) {
    let mut seen_defs: BTreeSet<(usize, String)> = BTreeSet::new();
    let mut seen_mods: BTreeSet<usize> = BTreeSet::new();
    let mut items = Vec::new();
    let mut count = 0;
    let mut stack = vec![(0usize, "manyfs".to_string())];
    while let Some((m, shown)) = stack.pop() {
        if !seen_mods.insert(m) {
            continue;
        }
        let module = &c.modules[m];
        for (name, &child) in &module.children {
            if c.modules[child].vis == Vis::Public {
                items.push(PublicItem {
                    path: format!("{shown}::{name}"),
                    kind: "mod".into(),
                });
                count += 1;
                stack.push((child, format!("{shown}::{name}")));
            }
        }
        let mut local: BTreeMap<String, (usize, String)> = BTreeMap::new();
        for (name, def) in &module.defs {
            if def.vis == Vis::Public {
                local.insert(name.clone(), (m, name.clone()));
            }
        }
        for u in module.uses.iter().filter(|u| u.vis == Vis::Public) {
            match (&u.name, c.resolve(m, &u.target)) {
                (Some(alias), Some((t, Some(item)))) => {
                    local.insert(alias.clone(), (t, item));
                }
                (Some(alias), Some((t, None))) => {
                    items.push(PublicItem {
                        path: format!("{shown}::{alias}"),
                        kind: "mod (re-export)".into(),
                    });
                    count += 1;
                    stack.push((t, format!("{shown}::{alias}")));
                }
                (None, Some((t, None))) => {
                    for (name, at) in exported(c, t, 0) {
                        local.insert(name, at);
                    }
                }
                _ => {}
            }
        }
        for (shown_name, (t, name)) in local {
            let Some(def) = c.modules[t].defs.get(&name) else {
                continue;
            };
            if !seen_defs.insert((t, name.clone())) {
                continue;
            }
            let members = match def.kind {
                DefKind::Struct | DefKind::Enum | DefKind::Trait => def.members,
                _ => 0,
            };
            let methods = inherent_public(c, t, &name);
            count += 1 + members + methods;
            items.push(PublicItem {
                path: format!("{shown}::{shown_name}"),
                kind: format!("{:?} (+{members} members, +{methods} methods)", def.kind),
            });
        }
    }
    items.sort();
    (items, count)
}

/// The `pub` methods and constants of inherent impls of the type `name`
/// defined in module `def_mod`.
fn inherent_public(c: &Crate, def_mod: usize, name: &str) -> usize {
    let mut n = 0;
    for (m, module) in c.modules.iter().enumerate() {
        for imp in &module.impls {
            if let Some((t, Some(ty))) = c.resolve(m, &imp.self_ty)
                && t == def_mod
                && ty == name
            {
                n += imp.public.len();
            }
        }
    }
    n
}

/// The public names module `m` offers to a glob import: its own `pub`
/// items and what it re-exports (by name or by glob), resolved to where
/// each is defined.
fn exported(c: &Crate, m: usize, depth: usize) -> Vec<(String, (usize, String))> {
    let mut out = Vec::new();
    if depth > 8 {
        return out;
    }
    let module = &c.modules[m];
    for (name, def) in &module.defs {
        if def.vis == Vis::Public {
            out.push((name.clone(), (m, name.clone())));
        }
    }
    for u in module.uses.iter().filter(|u| u.vis == Vis::Public) {
        match (&u.name, c.resolve(m, &u.target)) {
            (Some(alias), Some((t, Some(item)))) => out.push((alias.clone(), (t, item))),
            (None, Some((t, None))) if t != m => out.extend(exported(c, t, depth + 1)),
            _ => {}
        }
    }
    out
}
