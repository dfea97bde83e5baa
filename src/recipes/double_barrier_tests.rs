//! Scripted-event tests of the double_barrier machine: see double_barrier.rs.
