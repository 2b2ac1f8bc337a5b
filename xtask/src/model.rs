//! The module tree of one crate, read with `syn`: every module (file or
//! inline), what it defines, what it imports or re-exports, the paths its
//! code names and its inherent `impl` blocks. Code under `#[cfg(test)]` is
//! left out: tests may reach anything, the layering is about the product.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// What kind of item a name defines (for the public-item count).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefKind {
    Fn,
    Struct,
    Enum,
    Union,
    Trait,
    TypeAlias,
    Const,
    Static,
    Macro,
}

/// How visible an item or import is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Vis {
    /// `pub`: part of the crate's public face when reachable.
    Public,
    /// `pub(crate)`, `pub(super)`, `pub(in ...)`.
    Restricted,
    /// No visibility: private to the module.
    Private,
}

impl Vis {
    fn of(v: &syn::Visibility) -> Vis {
        match v {
            syn::Visibility::Public(_) => Vis::Public,
            syn::Visibility::Restricted(_) => Vis::Restricted,
            syn::Visibility::Inherited => Vis::Private,
        }
    }
}

/// One `use` leaf: `use a::b as name;` or `use a::b::*;` (`name` is `None`).
#[derive(Clone, Debug)]
pub struct UseEntry {
    pub name: Option<String>,
    pub target: Vec<String>,
    pub vis: Vis,
}

/// An item defined in a module.
#[derive(Clone, Debug)]
pub struct Def {
    pub kind: DefKind,
    pub vis: Vis,
    /// For structs: public fields; enums: variants; traits: items.
    pub members: usize,
}

/// An inherent `impl Type { ... }` block.
#[derive(Clone, Debug)]
pub struct InherentImpl {
    pub self_ty: Vec<String>,
    pub line: usize,
    /// Names of the `pub` functions and constants it defines.
    pub public: Vec<String>,
}

/// A path the module's code names, with the line it is on.
#[derive(Clone, Debug)]
pub struct PathRef {
    pub segs: Vec<String>,
    pub line: usize,
}

/// One module of the crate.
#[derive(Debug)]
pub struct Module {
    pub path: Vec<String>,
    pub file: PathBuf,
    pub parent: Option<usize>,
    pub vis: Vis,
    pub children: BTreeMap<String, usize>,
    pub defs: BTreeMap<String, Def>,
    pub uses: Vec<UseEntry>,
    pub refs: Vec<PathRef>,
    pub impls: Vec<InherentImpl>,
}

impl Module {
    /// `a::b::c`, or `crate` for the root.
    pub fn name(&self) -> String {
        if self.path.is_empty() {
            "crate".into()
        } else {
            self.path.join("::")
        }
    }
}

/// The whole crate.
pub struct Crate {
    pub modules: Vec<Module>,
}

/// Whether the attributes put the item under `#[cfg(test)]` (alone or in
/// `all(test, ...)`).
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        if !a.path().is_ident("cfg") {
            return false;
        }
        let syn::Meta::List(list) = &a.meta else {
            return false;
        };
        let text = list.tokens.to_string();
        let words: Vec<&str> = text
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
            .collect();
        words.contains(&"test") && !words.contains(&"not")
    })
}

impl Crate {
    /// Read the crate whose root file is `root` (a `lib.rs`).
    pub fn load(root: &Path) -> Result<Crate, String> {
        let mut c = Crate {
            modules: Vec::new(),
        };
        let file = parse(root)?;
        c.add_module(
            Vec::new(),
            root.to_path_buf(),
            root.parent().unwrap_or(Path::new(".")).to_path_buf(),
            None,
            Vis::Public,
            &file.items,
        )?;
        Ok(c)
    }

    fn add_module(
        &mut self,
        path: Vec<String>,
        file: PathBuf,
        dir: PathBuf,
        parent: Option<usize>,
        vis: Vis,
        items: &[syn::Item],
    ) -> Result<usize, String> {
        let id = self.modules.len();
        self.modules.push(Module {
            path: path.clone(),
            file: file.clone(),
            parent,
            vis,
            children: BTreeMap::new(),
            defs: BTreeMap::new(),
            uses: Vec::new(),
            refs: Vec::new(),
            impls: Vec::new(),
        });
        let mut collector = Collector::default();
        for item in items {
            if item_is_test_only(item) {
                continue;
            }
            match item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    let mut child_path = path.clone();
                    child_path.push(name.clone());
                    let child = if let Some((_, content)) = &m.content {
                        let child_dir = dir.join(&name);
                        self.add_module(
                            child_path,
                            file.clone(),
                            child_dir,
                            Some(id),
                            Vis::of(&m.vis),
                            content,
                        )?
                    } else {
                        let flat = dir.join(format!("{name}.rs"));
                        let nested = dir.join(&name).join("mod.rs");
                        let (child_file, child_dir) = if flat.exists() {
                            (flat, dir.join(&name))
                        } else if nested.exists() {
                            (nested, dir.join(&name))
                        } else {
                            return Err(format!("{}: module `{name}` has no file", file.display()));
                        };
                        let parsed = parse(&child_file)?;
                        self.add_module(
                            child_path,
                            child_file,
                            child_dir,
                            Some(id),
                            Vis::of(&m.vis),
                            &parsed.items,
                        )?
                    };
                    self.modules[id].children.insert(name, child);
                }
                syn::Item::Use(u) => {
                    let mut out = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut out);
                    let line = u.use_token.span.start().line;
                    for (name, target) in out {
                        collector.refs.push(PathRef {
                            segs: target.clone(),
                            line,
                        });
                        self.modules[id].uses.push(UseEntry {
                            name,
                            target,
                            vis: Vis::of(&u.vis),
                        });
                    }
                }
                other => {
                    if let Some((name, def)) = definition(other) {
                        self.modules[id].defs.insert(name, def);
                    }
                    if let syn::Item::Impl(imp) = other
                        && imp.trait_.is_none()
                        && let syn::Type::Path(tp) = &*imp.self_ty
                    {
                        let public = imp
                            .items
                            .iter()
                            .filter_map(|i| match i {
                                syn::ImplItem::Fn(f)
                                    if matches!(f.vis, syn::Visibility::Public(_)) =>
                                {
                                    Some(f.sig.ident.to_string())
                                }
                                syn::ImplItem::Const(c)
                                    if matches!(c.vis, syn::Visibility::Public(_)) =>
                                {
                                    Some(c.ident.to_string())
                                }
                                _ => None,
                            })
                            .collect();
                        self.modules[id].impls.push(InherentImpl {
                            self_ty: segments(&tp.path),
                            line: imp.impl_token.span.start().line,
                            public,
                        });
                    }
                    collector.visit_item(other);
                }
            }
        }
        self.modules[id].refs.extend(collector.refs);
        Ok(id)
    }

    /// Whether `ancestor` is `m` or one of its enclosing modules.
    pub fn is_within(&self, m: usize, ancestor: usize) -> bool {
        let mut cur = Some(m);
        while let Some(c) = cur {
            if c == ancestor {
                return true;
            }
            cur = self.modules[c].parent;
        }
        false
    }

    /// Resolve a path named in module `from` to the module that defines
    /// what it names (following `use` re-exports), and the item's name if
    /// the path ends at an item rather than a module. `None`: not this
    /// crate's (std, another crate, a local binding).
    pub fn resolve(&self, from: usize, segs: &[String]) -> Option<(usize, Option<String>)> {
        self.resolve_depth(from, segs, 0)
    }

    fn resolve_depth(
        &self,
        from: usize,
        segs: &[String],
        depth: usize,
    ) -> Option<(usize, Option<String>)> {
        if depth > 32 || segs.is_empty() {
            return None;
        }
        let (mut cur, mut rest) = match segs[0].as_str() {
            "crate" => (0, &segs[1..]),
            "self" => (from, &segs[1..]),
            "super" => {
                let mut cur = from;
                let mut i = 0;
                while i < segs.len() && segs[i] == "super" {
                    cur = self.modules[cur].parent?;
                    i += 1;
                }
                (cur, &segs[i..])
            }
            "Self" => return None,
            first => {
                if let Some(&child) = self.modules[from].children.get(first) {
                    (child, &segs[1..])
                } else {
                    return self.lookup(from, first, &segs[1..], depth);
                }
            }
        };
        while let Some(seg) = rest.first() {
            if let Some(&child) = self.modules[cur].children.get(seg.as_str()) {
                cur = child;
                rest = &rest[1..];
            } else {
                return self
                    .lookup(cur, seg, &rest[1..], depth)
                    .or(Some((cur, Some(seg.clone()))));
            }
        }
        Some((cur, None))
    }

    /// A name used in module `m` (not a child module): defined there,
    /// imported by name, or through a glob import.
    fn lookup(
        &self,
        m: usize,
        name: &str,
        rest: &[String],
        depth: usize,
    ) -> Option<(usize, Option<String>)> {
        let module = &self.modules[m];
        if module.defs.contains_key(name) {
            return Some((m, Some(name.to_string())));
        }
        for u in &module.uses {
            if u.name.as_deref() == Some(name) {
                let mut target = u.target.clone();
                target.extend(rest.iter().cloned());
                return self.resolve_depth(m, &target, depth + 1);
            }
        }
        for u in &module.uses {
            if u.name.is_none()
                && let Some((g, None)) = self.resolve_depth(m, &u.target, depth + 1)
                && g != m
            {
                let glob = &self.modules[g];
                if glob.children.contains_key(name)
                    || glob.defs.contains_key(name)
                    || glob.uses.iter().any(|x| x.name.as_deref() == Some(name))
                {
                    let mut target = vec![name.to_string()];
                    target.extend(rest.iter().cloned());
                    return self.resolve_depth(g, &target, depth + 1);
                }
            }
        }
        None
    }
}

fn parse(path: &Path) -> Result<syn::File, String> {
    let text = fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    syn::parse_file(&text).map_err(|e| format!("{}: {e}", path.display()))
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

fn item_is_test_only(item: &syn::Item) -> bool {
    is_test_only(item_attrs(item))
}

fn definition(item: &syn::Item) -> Option<(String, Def)> {
    let public_fields = |fields: &syn::Fields| {
        fields
            .iter()
            .filter(|f| matches!(f.vis, syn::Visibility::Public(_)))
            .count()
    };
    let (name, kind, vis, members) = match item {
        syn::Item::Fn(i) => (i.sig.ident.to_string(), DefKind::Fn, &i.vis, 0),
        syn::Item::Struct(i) => (
            i.ident.to_string(),
            DefKind::Struct,
            &i.vis,
            public_fields(&i.fields),
        ),
        syn::Item::Enum(i) => (i.ident.to_string(), DefKind::Enum, &i.vis, i.variants.len()),
        syn::Item::Union(i) => (i.ident.to_string(), DefKind::Union, &i.vis, 0),
        syn::Item::Trait(i) => (i.ident.to_string(), DefKind::Trait, &i.vis, i.items.len()),
        syn::Item::Type(i) => (i.ident.to_string(), DefKind::TypeAlias, &i.vis, 0),
        syn::Item::Const(i) => (i.ident.to_string(), DefKind::Const, &i.vis, 0),
        syn::Item::Static(i) => (i.ident.to_string(), DefKind::Static, &i.vis, 0),
        syn::Item::Macro(i) => {
            let name = i.ident.as_ref()?.to_string();
            let exported = i.attrs.iter().any(|a| a.path().is_ident("macro_export"));
            let vis = if exported { Vis::Public } else { Vis::Private };
            return Some((
                name,
                Def {
                    kind: DefKind::Macro,
                    vis,
                    members: 0,
                },
            ));
        }
        _ => return None,
    };
    Some((
        name,
        Def {
            kind,
            vis: Vis::of(vis),
            members,
        },
    ))
}

fn segments(path: &syn::Path) -> Vec<String> {
    let mut segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    if path.leading_colon.is_some() {
        segs.insert(0, "::".into());
    }
    segs
}

fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(Option<String>, Vec<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                if let Some(last) = prefix.last() {
                    out.push((Some(last.clone()), prefix.clone()));
                }
            } else {
                let mut t = prefix.clone();
                t.push(name.clone());
                out.push((Some(name), t));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut t = prefix.clone();
            let name = r.ident.to_string();
            if name != "self" {
                t.push(name);
            }
            out.push((Some(r.rename.to_string()), t));
        }
        syn::UseTree::Glob(_) => out.push((None, prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// Collects every path the code names, including inside macro calls whose
/// arguments parse as expressions (`format!`, `assert!`, `tracing::warn!`).
#[derive(Default)]
struct Collector {
    refs: Vec<PathRef>,
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        // A lone lower-case name (`x`, `f(..)`) is a local binding or a
        // function brought in by a `use`, which is counted as an import;
        // following it through glob imports would mistake locals for items.
        if p.segments.len() == 1
            && p.leading_colon.is_none()
            && p.segments[0]
                .ident
                .to_string()
                .starts_with(|c: char| c.is_ascii_lowercase())
        {
            syn::visit::visit_path(self, p);
            return;
        }
        let line = p
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.refs.push(PathRef {
            segs: segments(p),
            line,
        });
        syn::visit::visit_path(self, p);
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {
        // Nested modules are modules of their own.
    }

    fn visit_item_use(&mut self, _: &'ast syn::ItemUse) {
        // Recorded as imports by the module reader.
    }

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        syn::visit::visit_macro(self, m);
        use syn::parse::Parser;
        let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if let Ok(args) = parser.parse2(m.tokens.clone()) {
            for e in &args {
                self.visit_expr(e);
            }
        }
    }
}
