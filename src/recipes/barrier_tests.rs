//! Scripted-event tests of the barrier machine: see barrier.rs.
