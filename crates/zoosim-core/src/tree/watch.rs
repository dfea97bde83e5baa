//! One server's watch table (ZooKeeper's WatchManager, data and child
//! tables), keyed by connection (docs/ZOOKEEPER.md, "Setting and firing
//! watches" to "Watches and SetWatches").
//!
//! A connection is any `Ord + Copy` key the server chooses. Per path there
//! is a *set* of connections, so however often a connection registers on one
//! (path, kind) it gets one event. Watches are one-shot: firing removes them.

use std::collections::{BTreeMap, BTreeSet};

use super::DataTree;
use crate::path;
use crate::proto::{EventType, WatchEvent, WatchKind, Zxid};

/// Which connections watch which paths, in a data table (data and exist
/// watches) and a child table; `C` names a connection.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct WatchTable<C: Ord + Copy> {
    data: BTreeMap<String, BTreeSet<C>>,
    child: BTreeMap<String, BTreeSet<C>>,
}

impl<C: Ord + Copy> Default for WatchTable<C> {
    fn default() -> Self {
        WatchTable {
            data: BTreeMap::new(),
            child: BTreeMap::new(),
        }
    }
}

impl<C: Ord + Copy> WatchTable<C> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    fn table(&mut self, kind: WatchKind) -> &mut BTreeMap<String, BTreeSet<C>> {
        match kind {
            WatchKind::Data => &mut self.data,
            WatchKind::Child => &mut self.child,
        }
    }

    /// Renames connections and paths in place, for the models' symmetry
    /// reduction (both maps one-to-one; `path` gives a path's new name,
    /// None when it keeps its own).
    pub fn rename(&mut self, conn: impl Fn(C) -> C, path: impl Fn(&str) -> Option<String>) {
        for t in [&mut self.data, &mut self.child] {
            // Out first, then in: two paths may swap.
            let moved: Vec<(String, String)> = t
                .keys()
                .filter_map(|p| path(p).map(|q| (p.clone(), q)))
                .collect();
            let sets: Vec<(String, BTreeSet<C>)> = moved
                .into_iter()
                .filter_map(|(old, new)| t.remove(&old).map(|cs| (new, cs)))
                .collect();
            t.extend(sets);
            for cs in t.values_mut() {
                if cs.iter().any(|c| conn(*c) != *c) {
                    *cs = cs.iter().map(|c| conn(*c)).collect();
                }
            }
        }
    }

    /// Registers `conn`'s watch of `kind` on `path` (idempotent).
    pub fn register(&mut self, conn: C, kind: WatchKind, path: &str) {
        self.table(kind)
            .entry(path.to_owned())
            .or_default()
            .insert(conn);
    }

    /// Whether `conn` has a watch of `kind` on `path`.
    pub fn is_watching(&self, conn: C, kind: WatchKind, path: &str) -> bool {
        let table = match kind {
            WatchKind::Data => &self.data,
            WatchKind::Child => &self.child,
        };
        table.get(path).is_some_and(|s| s.contains(&conn))
    }

    /// The number of (connection, kind, path) watches held.
    pub fn len(&self) -> usize {
        self.data
            .values()
            .chain(self.child.values())
            .map(BTreeSet::len)
            .sum()
    }

    /// Whether no watch is held.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty() && self.child.is_empty()
    }

    /// Fires the watches a trigger reaches and removes them. Returns one
    /// event per connection, in connection order (WatchManager.triggerWatch):
    /// NodeDeleted consults both tables but reaches each connection once.
    pub fn fire(&mut self, trigger: &WatchEvent) -> Vec<(C, WatchEvent)> {
        let path = trigger.path.as_str();
        let conns: BTreeSet<C> = match trigger.event_type {
            EventType::NodeCreated | EventType::NodeDataChanged => {
                self.data.remove(path).unwrap_or_default()
            }
            EventType::NodeChildrenChanged => self.child.remove(path).unwrap_or_default(),
            EventType::NodeDeleted => {
                let mut conns = self.data.remove(path).unwrap_or_default();
                conns.extend(self.child.remove(path).unwrap_or_default());
                conns
            }
        };
        conns.into_iter().map(|c| (c, trigger.clone())).collect()
    }

    /// Fires every trigger of one txn in order.
    pub fn fire_all(&mut self, triggers: &[WatchEvent]) -> Vec<(C, WatchEvent)> {
        triggers.iter().flat_map(|t| self.fire(t)).collect()
    }

    /// Whether some watch, data or child, stands on `path`.
    pub fn is_watched(&self, path: &str) -> bool {
        self.data.contains_key(path) || self.child.contains_key(path)
    }

    /// Whether connection `conn` has any watch.
    pub fn has_connection(&self, conn: C) -> bool {
        [&self.data, &self.child]
            .into_iter()
            .any(|t| t.values().any(|conns| conns.contains(&conn)))
    }

    /// Drops every watch of a connection (it closed or broke).
    pub fn remove_connection(&mut self, conn: C) {
        for table in [&mut self.data, &mut self.child] {
            table.retain(|_, conns| {
                conns.remove(&conn);
                !conns.is_empty()
            });
        }
    }

    /// SetWatches after a reconnect: for each path the client still
    /// watches, either an event for what it missed since `relative_zxid`
    /// (one-shot: not re-registered) or a fresh registration
    /// (docs/ZOOKEEPER.md, "Watches and SetWatches"). Events come in the
    /// order data, exist, child.
    /// Like the server, a deleted path in both the data and the child list
    /// yields NodeDeleted twice; the client delivers it once (its watches
    /// for the path are gone after the first), so client layers must drop
    /// events that match none of their watches.
    pub fn set_watches(
        &mut self,
        conn: C,
        tree: &DataTree,
        relative_zxid: Zxid,
        data: &[String],
        exist: &[String],
        child: &[String],
    ) -> Vec<WatchEvent> {
        let mut events = Vec::new();
        let mut emit = |event_type, path: &str| {
            events.push(WatchEvent {
                event_type,
                path: path.to_owned(),
            })
        };
        for p in data {
            match tree.node(p) {
                None => emit(EventType::NodeDeleted, p),
                Some(n) if n.mzxid > relative_zxid => emit(EventType::NodeDataChanged, p),
                Some(_) => self.register(conn, WatchKind::Data, p),
            }
        }
        for p in exist {
            match tree.node(p) {
                Some(_) => emit(EventType::NodeCreated, p),
                None => self.register(conn, WatchKind::Data, p),
            }
        }
        for p in child {
            match tree.node(p) {
                None => emit(EventType::NodeDeleted, p),
                Some(n) if n.pzxid > relative_zxid => emit(EventType::NodeChildrenChanged, p),
                Some(_) => self.register(conn, WatchKind::Child, p),
            }
        }
        debug_assert!(
            events
                .iter()
                .all(|e| path::validate_path(&e.path, false).is_ok()),
            "replayed an invalid path"
        );
        events
    }
}
