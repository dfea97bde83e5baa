//! A fault's parameters, described once: whom it aims at, where the
//! network splits, how long it lasts. The nemesis draws them (or takes
//! them as placed), a scenario's `[[faults.at]]` places them, the shrinker
//! writes them back as such, and a history records them: all through this
//! one record. It lives here, beside the history, because the history
//! (layer 1) is the lowest module that needs it; the nemesis and the
//! scenario files sit above and may use it.

use std::fmt;
use std::time::Duration;

use super::ServerNo;

/// A fault's parameters, each present only for the fault kinds it applies
/// to. In a plan (a placed fault) an absent one is drawn by the nemesis;
/// in what the nemesis injected, it did not apply.
///
/// Lengths are [`Duration`]s, the nemesis's own unit; scenario files and
/// histories write them in whole milliseconds, which is exact because the
/// nemesis draws whole milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultParams {
    /// The client aimed at (client faults), by its scenario number.
    pub client: Option<usize>,
    /// The server hit (crashes; the near end of a link fault).
    pub server: Option<ServerNo>,
    /// The far end of a one-way clog or a link delay (`server` → `to`).
    pub to: Option<ServerNo>,
    /// A partition's one side (the other: every other server).
    pub split: Option<Vec<ServerNo>>,
    /// A partition's clients on `split`'s side (the others are on the
    /// other side), by scenario client number.
    pub split_clients: Option<Vec<usize>>,
    /// The servers a majority crash takes down.
    pub servers: Option<Vec<ServerNo>>,
    /// A three-way partition's sides.
    pub sides: Option<Vec<Vec<ServerNo>>>,
    /// A three-way partition's clients, side by side.
    pub side_clients: Option<Vec<Vec<usize>>>,
    /// Flipping partitions: each flip's side and how long it holds.
    pub flips: Option<Vec<(Vec<ServerNo>, Duration)>>,
    /// A link delay's extra time per message.
    pub delay: Option<Duration>,
    /// The outage, the network fault's length, the pause, or a forced
    /// expiry's race window.
    pub window: Option<Duration>,
}

impl FaultParams {
    /// The parameters as a history keeps them: only those its JSON-lines
    /// form writes (not where the clients went), and an empty or zero one
    /// as absent, since the form writes both alike (`[]`, `0`); so a
    /// history read back equals the one recorded.
    pub fn recorded(&self) -> FaultParams {
        FaultParams {
            split_clients: None,
            side_clients: None,
            flips: self.flips.clone().filter(|f| !f.is_empty()),
            delay: self.delay.filter(|d| !d.is_zero()),
            window: self.window.filter(|w| !w.is_zero()),
            ..self.clone()
        }
    }

    /// A link delay's extra time per message in ms, 0 if none.
    pub fn delay_ms(&self) -> u64 {
        ms(self.delay.unwrap_or_default())
    }

    /// The fault's window in ms, 0 if none.
    pub fn window_ms(&self) -> u64 {
        ms(self.window.unwrap_or_default())
    }

    /// Each flip's side and how long it holds in ms (none if no flips).
    pub fn flips_ms(&self) -> Vec<(Vec<ServerNo>, u64)> {
        let flips = self.flips.iter().flatten();
        flips.map(|(side, d)| (side.clone(), ms(*d))).collect()
    }
}

/// A length in whole milliseconds, as files and histories write it.
pub(crate) fn ms(d: Duration) -> u64 {
    d.as_millis() as u64
}

/// The parameters present, each after a space, as the nemesis's log
/// lines show them (` client 2`, ` split [0, 1] with clients [3]`,
/// ` for 1500 ms`); a zero delay or window is not shown.
impl fmt::Display for FaultParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = self.client {
            write!(f, " client {c}")?;
        }
        if let Some(s) = self.server {
            write!(f, " server {s}")?;
        }
        if let Some(t) = self.to {
            write!(f, " to {t}")?;
        }
        if let Some(side) = &self.split {
            write!(f, " split {side:?}")?;
        }
        if let Some(clients) = &self.split_clients {
            write!(f, " with clients {clients:?}")?;
        }
        if let Some(servers) = &self.servers {
            write!(f, " servers {servers:?}")?;
        }
        if let Some(sides) = &self.sides {
            write!(f, " sides {sides:?}")?;
        }
        if let Some(clients) = &self.side_clients {
            write!(f, " with clients {clients:?}")?;
        }
        for (side, d) in self.flips.iter().flatten() {
            write!(f, " {side:?} {} ms", d.as_millis())?;
        }
        if let Some(d) = self.delay.filter(|d| !d.is_zero()) {
            write!(f, " +{} ms", d.as_millis())?;
        }
        if let Some(w) = self.window.filter(|w| !w.is_zero()) {
            write!(f, " for {} ms", w.as_millis())?;
        }
        Ok(())
    }
}
